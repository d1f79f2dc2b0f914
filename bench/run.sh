#!/usr/bin/env bash
# Ingest benchmark: sealvol against restic, borg and casync on the same checkpoint
# series, side by side in one run. Prints a Markdown table for BENCHMARKS.md.
#
#   bash bench/run.sh [--gib 2] [--runs 3] [--work /var/tmp/sealvol-bench] [--baseline BIN]
#
# --baseline BIN adds rows for another sealvol build (the previous commit's, say), so a
# change is judged beside the code before it in the same run.
#
# Needs: python3 with numpy, restic, borgbackup, casync, hyperfine (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in restic borg casync hyperfine; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing; apt-get install restic borgbackup casync hyperfine" >&2; exit 1; }
done
python3 -c 'import numpy' 2>/dev/null || pip install --quiet numpy
cargo build --release --quiet -p sealvol
bin="${CARGO_TARGET_DIR:-target}/release/sealvol"
exec python3 bench/compare.py --sealvol "$bin" --shared "${SEALVOL_SHARED:-../shared}" "$@"
