#!/usr/bin/env python3
"""The Hugging Face Hub's API on `sealvol serve` (issue 62), side by side in one run.
Prints a Markdown table for BENCHMARKS.md.

    python3 bench/hub.py --sealvol BIN --checkpoint DIR [--runs 3] [--work DIR]

Run with the tests' virtual environment (huggingface_hub installed):
target/test-tools/venv. `--checkpoint DIR`: a checkpoint of
`../shared/bench/gen_checkpoints.py` (its `v1`: four shards of about 512 MiB, a config and
a tokenizer). Each measure is the median of --runs, the host's page cache dropped
before each (the repository's packs come from disk, as on a server that was not just
written to):
- the first request that needs a version's ids (`model_info(files_metadata=True)`):
  every file read once, proven and hashed (SHA-256 of the large ones), per GiB; the
  same request again (held in memory), and after a restart (read back from
  `hub/NS/VOL/DIGEST`): computed once;
- `snapshot_download` through the server (a fresh HF cache each run) against
  `sealvol volume pull` through the same server (`--remote`, a fresh node state each run),
  and against the Hub stand-in (tests/servers/hf_server.py) serving the same files
  straight from the folder (its large files redirected to its CDN route on another host
  name, as the Hub's are).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from python import drop_caches, timed  # noqa: E402


def start(cmd, env=None):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline().strip()
    assert line.startswith("listening on "), line
    return p, line.split("listening on ", 1)[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work")
    a = ap.parse_args()
    os.environ.update(HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1")
    import huggingface_hub as hh

    src = Path(a.checkpoint)
    size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    gib = size / (1 << 30)
    work = Path(a.work or tempfile.mkdtemp(prefix="sealvol-bench-hub-", dir="/var/tmp"))
    env = dict(os.environ, SEALVOL_REPO=str(work / "repo"), SEALVOL_STATE=str(work / "state"),
               XDG_CACHE_HOME=str(work / "xdg-cache"), XDG_CONFIG_HOME=str(work / "xdg-config"),
               HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1")
    subprocess.run([a.sealvol, "volume", "push", str(src), "bench/ck", "--tag", "v1"], env=env, check=True,
                   capture_output=True)
    med = statistics.median
    rows = []

    def serve():
        return start([a.sealvol, "serve", "--listen", "127.0.0.1:0"], env)

    # The ids: computed once, on the first request that needs them.
    drop_caches()
    server, url = serve()
    key = (work / "state" / "serve" / "admin.key").read_text().strip()
    api = hh.HfApi(endpoint=url + "/hf", token=key)
    first = timed(lambda: api.model_info("bench/ck", revision="v1", files_metadata=True))
    again = timed(lambda: api.model_info("bench/ck", revision="v1", files_metadata=True))
    server.kill()
    server.wait()
    drop_caches()
    server, url = serve()
    api = hh.HfApi(endpoint=url + "/hf", token=key)
    restarted = timed(lambda: api.model_info("bench/ck", revision="v1", files_metadata=True))
    rows.append((f"the version's ids, first request ({gib:.2f} GiB read, proven, hashed)",
                 f"{first:.2f} s", f"{first / gib:.2f} s per GiB", "once per version"))
    rows.append(("the same request again / after a restart", f"{again * 1000:.0f} ms / {restarted * 1000:.0f} ms",
                 "held in memory / read back from hub/NS/VOL/DIGEST", ""))

    # snapshot_download through serve, against `volume pull` through the same serve.
    remote = dict(env, SEALVOL_REMOTE=url, SEALVOL_API_KEY=key)
    snap, pull = [], []
    for i in range(a.runs):
        cache = work / f"hf-cache-{i}"
        drop_caches()
        snap.append(timed(lambda: hh.snapshot_download("bench/ck", revision="v1", endpoint=url + "/hf", token=key,
                                                       cache_dir=cache)))
        shutil.rmtree(cache)
        out, state = work / f"pull-{i}", work / f"pull-state-{i}"
        drop_caches()
        pull.append(timed(lambda: subprocess.run(
            [a.sealvol, "volume", "pull", "vol:bench/ck:v1", str(out)],
            env=dict(remote, SEALVOL_STATE=str(state), XDG_CACHE_HOME=str(work / f"pull-cache-{i}")),
            check=True, capture_output=True)))
        shutil.rmtree(out)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(work / f"pull-cache-{i}", ignore_errors=True)
    server.kill()
    server.wait()
    rows.append((f"snapshot_download through serve ({gib:.2f} GiB)", f"{med(snap):.2f} s ({gib * 1024 / med(snap):.0f} MiB/s)",
                 f"sealvol volume pull through the same serve: {med(pull):.2f} s",
                 f"{med(pull) / med(snap):.2f}× pull's speed"))

    # The Hub stand-in serving the same folder directly.
    stand_in, hub_url = start([sys.executable, str(ROOT / "tests/servers/hf_server.py"), "--port", "0",
                               "--repo", f"bench/ck={src}", "--cdn-host", "localhost"])
    try:
        direct = []
        for i in range(a.runs):
            cache = work / f"hf-direct-{i}"
            drop_caches()
            direct.append(timed(lambda: hh.snapshot_download("bench/ck", endpoint=hub_url, cache_dir=cache)))
            shutil.rmtree(cache)
    finally:
        stand_in.kill()
        stand_in.wait()
    rows.append(("snapshot_download from the Hub stand-in (files straight from the folder)",
                 f"{med(direct):.2f} s", f"through serve: {med(snap):.2f} s", f"{med(direct) / med(snap):.2f}×"))

    print("| measure | figure | against | ratio |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
