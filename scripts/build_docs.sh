#!/usr/bin/env bash
# Builds the documentation site into build-docs/html (or $1): Doxygen's XML of the public headers,
# then Sphinx with MyST and breathe, warnings as errors (a broken link, reference or page fails).
# The tools are Debian packages (scripts/setup.sh installs them with SUBLET_SETUP_DOCS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build-docs/html}"
doxygen_out="build-docs/doxygen"
# The headers a user programs against; the API page documents exactly these.
public_headers=(
  runtime/tensor.h runtime/nn/module.h runtime/optim/optimizer.h
  memory/registry.h memory/monitor.h memory/caching_allocator.h memory/config.h
)
mkdir -p "$doxygen_out"
sed -e "s|@OUT@|$doxygen_out|" -e "s|@INPUT@|${public_headers[*]}|" -e "s|@ROOT@|$PWD|" \
  docs/Doxyfile.in > "$doxygen_out/Doxyfile"
doxygen "$doxygen_out/Doxyfile"
# Debian's Sphinx runs under Debian's Python, whatever python3 is first on PATH.
SUBLET_DOXYGEN_XML="$PWD/$doxygen_out/xml" /usr/bin/python3 -m sphinx -W --keep-going -q -b html docs "$out"
echo "docs: $out/index.html"
