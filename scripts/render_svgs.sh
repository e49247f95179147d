#!/usr/bin/env bash
# Renders the SVG plots of a `sublet profile` output folder (and its HTML page) to PNG with
# headless Chromium, so a plot can be checked in a real browser engine, not just parsed as XML.
#   scripts/render_svgs.sh [PROFILE_DIR] [PNG_DIR]     (defaults: profile_out, PROFILE_DIR/png)
# Installs Debian's chromium with apt-get when it is missing. Fails when a screenshot is not
# written or is blank (a PNG that small holds nothing but the background).
set -euo pipefail
dir="${1:-profile_out}"
out="${2:-$dir/png}"
browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$browser" ]]; then
  echo "render_svgs: installing chromium with apt-get" >&2
  sudo_cmd=""; [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq chromium >/dev/null
  browser="$(command -v chromium)"
fi
mkdir -p "$out"
# Reads the width and height attributes of an SVG's root element (the plots set both).
svg_size() { python3 -c 'import sys,xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); print(int(float(r.get("width"))), int(float(r.get("height"))))' "$1"; }
status=0
for svg in memory layers segments; do
  file="$dir/$svg.svg"
  [[ -f "$file" ]] || { echo "render_svgs: $file is missing" >&2; status=1; continue; }
  read -r width height < <(svg_size "$file")
  png="$(realpath "$out")/$svg.png"
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot="$png" \
    --window-size="$width,$height" "file://$(realpath "$file")" >/dev/null 2>&1 || true
  if [[ ! -s "$png" || $(stat -c %s "$png") -lt 5000 ]]; then
    echo "render_svgs: $svg.svg did not render ($png missing or blank)" >&2; status=1
  else
    echo "$png (${width}x${height})"
  fi
done
if [[ -f "$dir/memory.html" ]]; then
  png="$(realpath "$out")/memory_html.png"
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot="$png" --window-size=1300,2400 \
    "file://$(realpath "$dir/memory.html")" >/dev/null 2>&1 || true
  [[ -s "$png" ]] && echo "$png (page)" || { echo "render_svgs: memory.html did not render" >&2; status=1; }
fi
exit $status
