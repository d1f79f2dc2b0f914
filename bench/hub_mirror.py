#!/usr/bin/env python3
"""The pull-through Hub mirror (issue 63), side by side in one run. Prints a Markdown
table for BENCHMARKS.md.

    python3 bench/hub_mirror.py --sealvol BIN --checkpoint DIR [--runs 3] [--clients 4]

Run with the tests' virtual environment (huggingface_hub installed):
target/test-tools/venv. `--checkpoint DIR`: a checkpoint of
`../shared/bench/gen_checkpoints.py` (its `v1`: about 2 GiB). The upstream is the Hub
stand-in (tests/servers/hf_server.py) serving that folder, its large files redirected
to its CDN route on another host name, as the Hub's are; its `--log` counts every byte
it sends. Each run, with the page cache dropped first:
- one client alone, `snapshot_download` straight from the stand-in (a fresh HF cache);
- N clients at once straight from the stand-in (what this machine's clients cost);
- one client, then N clients at once (separate processes, fresh caches) through a mirror that has never
  seen the model (`serve --hf-upstream`, a fresh repository and state): the time until
  the last one is done, and the bytes the stand-in sent, against the model's size.
Targets: upstream bytes <= 1.02x the model, time <= 1.2x the one client direct.
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
from python import drop_caches  # noqa: E402

CLIENT = """
import sys, huggingface_hub as hh
hh.snapshot_download("org/ck", endpoint=sys.argv[1], token=sys.argv[2] or None, cache_dir=sys.argv[3])
"""


def start(cmd, env=None):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline().strip()
    assert line.startswith("listening on "), line
    return p, line.split("listening on ", 1)[1]


def sent(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(int(line.rsplit(" ", 1)[1]) for line in log.read_text().splitlines())


def clients(n, endpoint, token, work: Path) -> float:
    env = dict(os.environ, HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1")
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, endpoint, token, str(work / f"hf-{i}")], env=env)
             for i in range(n)]
    for p in procs:
        assert p.wait() == 0, "a client failed"
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--work")
    a = ap.parse_args()
    src = Path(a.checkpoint)
    size = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    work = Path(a.work or tempfile.mkdtemp(prefix="sealvol-bench-mirror-", dir="/var/tmp"))
    log = work / "upstream.log"
    up, up_url = start([sys.executable, str(ROOT / "tests/servers/hf_server.py"), "--port", "0",
                        "--repo", f"org/ck={src}", "--log", str(log), "--cdn-host", "localhost"])
    direct, direct_n, alone, mirrored, ratios = [], [], [], [], []
    try:
        for run in range(a.runs):
            drop_caches()
            direct.append(clients(1, up_url, "", work / "direct"))
            shutil.rmtree(work / "direct")
            drop_caches()
            direct_n.append(clients(a.clients, up_url, "", work / "direct"))
            shutil.rmtree(work / "direct")

            alone.append(mirror_run(a, work / f"alone-{run}", up_url, 1, log, size)[0])
            t, ratio = mirror_run(a, work / f"mirror-{run}", up_url, a.clients, log, size)
            mirrored.append(t)
            ratios.append(ratio)
            print(f"run {run + 1}: direct {direct[-1]:.2f} s, one through the mirror {alone[-1]:.2f} s, "
                  f"{a.clients} through it {mirrored[-1]:.2f} s, upstream {ratios[-1]:.3f}x the model",
                  file=sys.stderr)
    finally:
        up.kill()
        shutil.rmtree(work, ignore_errors=True)
    d, dn, o, m, r = (statistics.median(x) for x in (direct, direct_n, alone, mirrored, ratios))
    gib = size / (1 << 30)
    print(f"| what ({gib:.2f} GiB, median of {a.runs}) | seconds | vs one client direct | target |")
    print("| --- | --- | --- | --- |")
    print(f"| one client, straight from the stand-in | {d:.2f} | 1.00x | |")
    print(f"| {a.clients} clients at once, straight from the stand-in (each its own download) | {dn:.2f} | {dn / d:.2f}x | |")
    print(f"| one client through a cold mirror | {o:.2f} | {o / d:.2f}x | |")
    print(f"| {a.clients} clients at once through a cold mirror | {m:.2f} | {m / d:.2f}x | <= 1.2x |")
    print(f"| bytes the upstream sent ({a.clients} clients), against the model | | {r:.3f}x (max {max(ratios):.3f}x) | <= 1.02x |")


def mirror_run(a, run_dir: Path, up_url: str, n: int, log: Path, size: int):
    """N clients through a fresh mirror: (seconds, upstream bytes / model size)."""
    env = dict(os.environ, SEALVOL_REPO=str(run_dir / "repo"), SEALVOL_STATE=str(run_dir / "state"),
               XDG_CACHE_HOME=str(run_dir / "xdg-cache"), XDG_CONFIG_HOME=str(run_dir / "xdg-config"))
    subprocess.run([a.sealvol, "init"], env=env, check=True, capture_output=True)
    srv, url = start([a.sealvol, "serve", "--listen", "127.0.0.1:0", "--hf-upstream", up_url], env=env)
    key = (run_dir / "state" / "serve" / "admin.key").read_text().strip()
    drop_caches()
    before = sent(log)
    t = clients(n, url + "/hf", key, run_dir)
    ratio = (sent(log) - before) / size
    srv.kill()
    srv.wait()
    shutil.rmtree(run_dir)
    return t, ratio


if __name__ == "__main__":
    main()
