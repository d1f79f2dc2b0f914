#!/usr/bin/env bash
# Regenerates screenshots/ from the views' test fixtures: SVG for every screen and
# theme, and PNG beside each when rsvg-convert (Debian: librsvg2-bin) is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -f screenshots/*.svg
cargo run --quiet -p sealvol-views --example screenshots >/dev/null
if command -v rsvg-convert >/dev/null; then
  rm -f screenshots/*.png
  for f in screenshots/*-dark.svg; do rsvg-convert "$f" -o "${f%.svg}.png"; done
else
  # The README shows the PNGs: never delete them without drawing them again.
  echo "rsvg-convert (Debian: librsvg2-bin) not found: the PNGs are left as they were" >&2
fi
ls screenshots
