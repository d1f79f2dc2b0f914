#!/usr/bin/env bash
# The whole suite N times in a row (default 3) beside two CPU hogs: a test that fails
# when the machine is busy fails here. Then the soak tests, which the suite leaves
# out for their length: ignored tests named soak_* (the 8-node cluster, ...), once.
# README.md names this command; each run ends with scripts/test.sh's summary line,
# and this script with one line of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
yes > /dev/null & hog1=$!
yes > /dev/null & hog2=$!
trap 'kill $hog1 $hog2 2>/dev/null || true' EXIT
failed=0
for i in $(seq 1 "$runs"); do
  echo "soak: run $i of $runs, beside two CPU hogs" >&2
  bash scripts/test.sh || failed=$((failed + 1))
done
soak_failed=0
echo "soak: the soak tests (ignored by the suite), beside two CPU hogs" >&2
bash scripts/test.sh --workspace -- --ignored soak_ || soak_failed=1
echo "soak: $runs runs beside two CPU hogs, $failed failed; the soak tests $([ $soak_failed -eq 0 ] && echo passed || echo FAILED)"
[ "$failed" -eq 0 ] && [ "$soak_failed" -eq 0 ]
