#!/usr/bin/env bash
# Checking a repository: sealvol's verify (structure with its default sample, and
# --read-data) beside restic check and borg check on the same three checkpoints, and
# BASELINE's verify (before the damage issue it read every pack and then every file).
# Page cache dropped is not possible without root on every machine, so every tool reads
# from a warm page cache: the figures compare CPU and I/O paths, not the disk.
#
#   bash bench/verify.sh BASELINE_BIN [--work /var/tmp/sealvol-bench]
#
# Needs hyperfine, restic, borgbackup (Debian packages), python3 with numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:?usage: bench/verify.sh BASELINE_BIN}"
work="${3:-/var/tmp/sealvol-bench}"
cargo build --release --quiet -p sealvol
new="$(realpath "${CARGO_TARGET_DIR:-target}/release/sealvol")"
data="$work/ck-2.0"
[ -d "$data/v3" ] || python3 "${SEALVOL_SHARED:-../shared}/bench/gen_checkpoints.py" "$data" --gib 2
run="$(mktemp -d "$work/verify.XXXX")"
trap 'rm -rf "$run"' EXIT
export SEALVOL_REPO="$run/sv" SEALVOL_STATE="$run/state" XDG_CONFIG_HOME="$run/cfg" XDG_CACHE_HOME="$run/cache"
export RESTIC_REPOSITORY="$run/restic" RESTIC_PASSWORD=bench RESTIC_CACHE_DIR="$run/restic-cache"
export BORG_REPO="$run/borg" BORG_PASSPHRASE="" BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes BORG_BASE_DIR="$run/borg-base"
restic init -q
borg init -e none
for v in v1 v2 v3; do
  "$new" volume push "$data/$v" b/ck --tag "$v" -q >/dev/null
  (cd "$data/$v" && restic backup -q . >/dev/null && borg create "::$v" . )
done
du -sh "$run/sv" "$run/restic" "$run/borg"
hyperfine -N --runs 5 --warmup 1 --export-markdown "$run/verify.md" \
  -n "sealvol verify (structure + sample)" "$new volume verify -q" \
  -n "sealvol verify --read-data" "$new volume verify --read-data -q" \
  -n "baseline verify (reads everything twice)" "$base volume verify -q" \
  -n "restic check" "restic check -q" \
  -n "restic check --read-data" "restic check --read-data -q" \
  -n "borg check" "borg check" \
  -n "borg check --verify-data" "borg check --verify-data" >/dev/null
cat "$run/verify.md"
