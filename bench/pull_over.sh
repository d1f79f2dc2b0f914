#!/usr/bin/env bash
# Pull over a folder that already holds a close version (a rollback, a canary promoted):
# `volume pull v2 DIR --force` where DIR holds v1, and a re-pull of the same version,
# this build beside BASELINE in one run (hyperfine, medians). rsync's --checksum is the
# peer for "write only what differs" on one machine. First, a cold pull of v1 into an
# empty folder with the node cache empty (packs in the page cache): wall time and the
# CPU seconds the pull spends (user, system), the table cold.md.
#
#   bash bench/pull_over.sh BASELINE_BIN [--work /var/tmp/sealvol-bench]
#
# Needs hyperfine and rsync (Debian packages), python3 with numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:?usage: bench/pull_over.sh BASELINE_BIN}"
work="${3:-/var/tmp/sealvol-bench}"
cargo build --release --quiet -p sealvol
new="$(realpath "${CARGO_TARGET_DIR:-target}/release/sealvol")"
data="$work/ck-2.0"
[ -d "$data/v2" ] || python3 "${SEALVOL_SHARED:-../shared}/bench/gen_checkpoints.py" "$data" --gib 2
run="$(mktemp -d "$work/pull-over.XXXX")"
trap 'rm -rf "$run"' EXIT
export SEALVOL_REPO="$run/repo" SEALVOL_STATE="$run/state" XDG_CONFIG_HOME="$run/cfg" XDG_CACHE_HOME="$run/cache"
"$new" volume push "$data/v1" b/ck --tag v1 -q >/dev/null
"$new" volume push "$data/v2" b/ck --tag v2 -q >/dev/null
out="$run/out"
cat "$run"/repo/packs/*/* >/dev/null
label() { case "$1" in base) echo "baseline: cold pull v1";; new) echo "this build: cold pull v1";; esac; }
pullcmd() { case "$1" in base) echo "$base volume pull b/ck:v1 $out -q";; new) echo "$new volume pull b/ck:v1 $out -q";; esac; }
# Twice, the second time in the other order, so that neither build always runs on a
# machine the other warmed: each figure is the mean of the two.
for order in "base new" "new base"; do
  set -- $order
  hyperfine -N --runs 7 --export-json "$run/cold-$1.json" \
    --prepare "bash -c 'rm -rf $out $run/cache; sync'" \
    -n "$(label "$1")" "$(pullcmd "$1")" \
    -n "$(label "$2")" "$(pullcmd "$2")" >/dev/null
done
python3 - "$run/cold-base.json" "$run/cold-new.json" >"$run/cold.md" <<'PY'
import json, sys
runs = {}
for path in sys.argv[1:]:
    for r in json.load(open(path))["results"]:
        runs.setdefault(r["command"], []).append(r)
print("| command (two rounds, the order swapped) | wall (median, mean of the rounds) | user CPU (mean) | system CPU (mean) |")
print("| --- | --- | --- | --- |")
for name in sorted(runs):
    rs = runs[name]
    m = lambda k: sum(r[k] for r in rs) / len(rs)  # noqa: E731
    print(f"| {name} | {m('median'):.2f} s | {m('user'):.2f} s | {m('system'):.2f} s |")
PY
hyperfine -N --runs 7 --export-markdown "$run/over.md" \
  --prepare "bash -c 'rm -rf $out && $new volume pull b/ck:v1 $out -q'" \
  -n "baseline: pull v2 over v1" "$base volume pull b/ck:v2 $out --force -q" \
  -n "this build: pull v2 over v1" "$new volume pull b/ck:v2 $out --force -q" \
  -n "rsync --checksum v2 over v1" "rsync -a --checksum --delete $data/v2/ $out/" >/dev/null
hyperfine -N --runs 7 --export-markdown "$run/same.md" \
  -n "baseline: re-pull v2" "$base volume pull b/ck:v2 $out --force -q" \
  -n "this build: re-pull v2" "$new volume pull b/ck:v2 $out --force -q" \
  -n "rsync --checksum, nothing changed" "rsync -a --checksum --delete $data/v2/ $out/" >/dev/null
cat "$run/cold.md" "$run/over.md" "$run/same.md"
