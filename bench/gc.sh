#!/usr/bin/env bash
# Garbage collection after deleting every other checkpoint of a training run: sealvol's
# `volume gc` beside `restic forget` + `restic prune` and `borg delete` + `borg compact`,
# on the same checkpoints, in one run. Each tool's repository is copied before the
# deletion, and the delete + collect is run RUNS times from that copy: time (median),
# bytes freed, and peak memory (max RSS, from /usr/bin/time).
#
#   bash bench/gc.sh [--work /var/tmp/sealvol-bench] [--gib 0.25] [--steps 50] [--runs 3]
#
# sealvol's collection is two runs of `volume gc --no-wait` (the first purges, marks,
# repacks and condemns; the second, after the 1 s grace period set for the benchmark,
# sweeps): their times are added, so no waiting is counted. The retention window is
# crossed with SEALVOL_NOW. Needs restic, borgbackup, python3 with numpy, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
work=/var/tmp/sealvol-bench gib=0.25 steps=50 runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --gib) gib="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
cargo build --release --quiet -p sealvol
sv="$(realpath "${CARGO_TARGET_DIR:-target}/release/sealvol")"
mkdir -p "$work"
run="$(mktemp -d "$work/gc.XXXX")"
trap 'rm -rf "$run"' EXIT
export SEALVOL_STATE="$run/state" XDG_CONFIG_HOME="$run/cfg" XDG_CACHE_HOME="$run/cache"
export RESTIC_PASSWORD=bench RESTIC_CACHE_DIR="$run/restic-cache"
export BORG_PASSPHRASE="" BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes BORG_BASE_DIR="$run/borg-base"
restic -r "$run/restic" init -q
borg init -e none "$run/borg"

# Checkpoints are ingested as the generator finishes them, then removed, so the run
# never holds more than a few on disk. Odd steps are the ones deleted later.
n=0
python3 "${SEALVOL_SHARED:-../shared}/bench/gen_training_run.py" "$run/ckpt" \
    --gib "$gib" --steps "$steps" |
while read -r line; do
  path="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["path"])' "$line")"
  if [ $((n % 2)) -eq 1 ]; then parity=odd; else parity=even; fi
  ref="$(SEALVOL_REPO="$run/sv" "$sv" -q volume push "$path" b/run)"
  echo "$parity $ref" >> "$run/refs"
  (cd "$path" && restic -r "$run/restic" backup -q --tag "$parity" . >/dev/null)
  (cd "$path" && borg create "$run/borg::$parity-$n" .)
  rm -rf "$path"
  n=$((n + 1))
done
SEALVOL_REPO="$run/sv" "$sv" -q settings --gc-grace 1s >/dev/null
echo "ingested $(wc -l < "$run/refs") checkpoints of $gib GiB"
# The tools' caches go with their repositories: borg refuses a cache newer than its
# repository, as restoring the copy would leave it.
keep="sv restic borg restic-cache borg-base"
for t in $keep; do cp -a "$run/$t" "$run/$t.orig"; done

later="$(date -u -d '+8 days' +%Y-%m-%dT%H:%M:%SZ)"
bytes() { du -sb "$1" | cut -f1; }
# Prints "seconds max_rss_kib" for the command given.
timed() {
  local out="$run/time.$$"
  /usr/bin/time -f "%e %M" -o "$out" "$@" >"$run/out" 2>"$run/stderr" ||
    { cat "$run/stderr" >&2; exit 1; }
  cat "$out"
}
results="$run/results"
: > "$results"
for i in $(seq "$runs"); do
  for t in $keep; do rm -rf "$run/$t"; cp -a "$run/$t.orig" "$run/$t"; done
  # Every tool drops the odd checkpoints first (not timed: bookkeeping, not collection).
  grep '^odd ' "$run/refs" | cut -d' ' -f2 | while read -r r; do
    SEALVOL_REPO="$run/sv" "$sv" -q volume delete "$r" --yes >/dev/null
  done
  # `forget --tag odd` alone applies no policy and forgets nothing: name the snapshots.
  restic -r "$run/restic" forget -q $(restic -r "$run/restic" snapshots -q --tag odd --json |
    python3 -c 'import json,sys; print(" ".join(s["short_id"] for s in json.load(sys.stdin)))') >/dev/null
  borg delete --glob-archives 'odd-*' "$run/borg"
  for t in sv restic borg; do eval "before_$t=$(bytes "$run/$t")"; done
  read -r s1 m1 < <(SEALVOL_REPO="$run/sv" SEALVOL_NOW="$later" timed "$sv" volume gc --no-wait --json)
  cp "$run/out" "$run/gc1.json"
  sleep 1.2
  read -r s2 m2 < <(SEALVOL_REPO="$run/sv" SEALVOL_NOW="$later" timed "$sv" volume gc --no-wait --json)
  cp "$run/out" "$run/gc2.json"
  read -r rs rm_ < <(timed restic -r "$run/restic" prune -q)
  read -r bs bm < <(timed borg compact "$run/borg")
  sv_s="$(echo "$s1 + $s2" | bc)"
  sv_m=$(( m1 > m2 ? m1 : m2 ))
  echo "sealvol $sv_s $sv_m $((before_sv - $(bytes "$run/sv"))) $(bytes "$run/sv")" >> "$results"
  echo "restic $rs $rm_ $((before_restic - $(bytes "$run/restic"))) $(bytes "$run/restic")" >> "$results"
  echo "borg $bs $bm $((before_borg - $(bytes "$run/borg"))) $(bytes "$run/borg")" >> "$results"
  SEALVOL_REPO="$run/sv" "$sv" -q volume verify >/dev/null
done
echo
echo "| tool | collect (median of $runs, s) | peak memory (MiB) | freed (MiB) | repository after (MiB) |"
echo "| --- | --- | --- | --- | --- |"
for t in sealvol restic borg; do
  grep "^$t " "$results" | sort -k2 -n | awk -v runs="$runs" -v t="$t" '
    { s[NR]=$2; m=($3>m?$3:m); f=$4; a=$5 }
    END { printf "| %s | %.2f | %.0f | %.0f | %.0f |\n", t, s[int((runs+1)/2)], m/1024, f/1048576, a/1048576 }'
done
echo
python3 - "$run/gc1.json" "$run/gc2.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["report"] for p in sys.argv[1:])
print(f"sealvol, last run: purged {len(a['purged'])} versions; first gc condemned {a['condemned_packs']} packs and "
      f"{a['condemned_files']} chunk lists ({a['condemned_bytes'] / 2**20:.0f} MiB), rewrote {a['repacked']} packs "
      f"({a['repacked_bytes'] / 2**20:.0f} MiB into {a['repack_new_bytes'] / 2**20:.0f} MiB); second gc swept "
      f"{b['rounds_swept']} round: deleted {b['deleted_packs']} packs and {b['deleted_files']} chunk lists "
      f"({b['bytes_freed'] / 2**20:.0f} MiB); {b['packs_before']} packs before it")
PY
echo "commands: sealvol volume gc --no-wait ×2 (1 s grace between); restic 0.14 prune (after forget of the odd snapshots); borg 1.2 compact (after delete --glob-archives 'odd-*')"
