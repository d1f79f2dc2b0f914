#!/usr/bin/env python3
"""Watch mode on a training run, beside restic backing up each checkpoint as it lands.

    python3 bench/watch.py [--work /var/tmp/sealvol-bench] [--gib 2] [--steps 10]
                           [--settle 2s] [--idle-secs 60] [--files 10000]

1. `gen_training_run.py --gib G --steps N` writes the run (10% of the layers rewritten
   per step) while `sealvol volume watch --settle S` seals it in a background agent.
   The time each checkpoint's last byte was written is when the generator printed its
   line (after its fsync); sealed is the push's own time in `watch show --json`. Older
   checkpoints are deleted once sealed (as a trainer's save limit does), so the run
   holds only a few on disk. Reported per checkpoint: bytes written to the repository
   against the bytes the step changed, and seconds from last write to sealed (median and
   worst over the run).
2. The same run again (same seed, same bytes), with `restic backup` of each checkpoint
   as soon as the generator finishes it: the repository's growth per checkpoint.
3. Idle CPU: a watch over a folder of `--files` files, sealed once, then left alone for
   `--idle-secs`: the agent's CPU time over that period (utime + stime from /proc), with
   inotify and with `--poll`.

Needs python3 with numpy, restic. Builds sealvol in release mode.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SEALVOL_SHARED", ROOT.parent / "shared"))
GEN = SHARED / "bench" / "gen_training_run.py"


def sh(*args, env=None, check=True, capture=True):
    r = subprocess.run(args, env=env, capture_output=capture, text=True)
    if check and r.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed: {r.stderr}")
    return r.stdout


def du(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                pass
    return total


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        after = f.read().rsplit(")", 1)[1].split()
    return int(after[11]) + int(after[12])  # utime + stime


class Sealvol:
    def __init__(self, binary, home):
        self.bin = binary
        self.env = dict(os.environ)
        self.env.update(
            SEALVOL_REPO=str(home / "repo"),
            SEALVOL_STATE=str(home / "state"),
            XDG_CONFIG_HOME=str(home / "cfg"),
            XDG_CACHE_HOME=str(home / "cache"),
        )
        self.agent = None

    def __call__(self, *args):
        return sh(self.bin, *args, env=self.env)

    def start_agent(self):
        self.agent = subprocess.Popen(
            [self.bin, "agent"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        sock = Path(self.env["SEALVOL_STATE"]) / "agent.sock"
        deadline = time.time() + 30
        while not sock.exists():
            if time.time() > deadline:
                sys.exit("the agent did not start")
            time.sleep(0.05)
        # Its socket exists once it listens; one request makes sure it answers.
        self("watch", "ls", "--json")

    def stop_agent(self):
        if self.agent:
            self.agent.terminate()
            self.agent.wait()

    def view(self, wid):
        return json.loads(self("watch", "show", str(wid), "--json"))


def watch_run(sv, work, a):
    run = work / "run"
    sv.start_agent()
    wid = sv("volume", "watch", str(run), "w/run", "--detach", "--settle", a.settle,
             "--tag", "latest", "--tag", "step-{step}").strip()
    written = {}  # checkpoint name -> (wall time of its last write, changed bytes, bytes)

    def generate():
        p = subprocess.Popen(
            [sys.executable, str(GEN), str(run), "--gib", str(a.gib), "--steps", str(a.steps)],
            stdout=subprocess.PIPE, text=True,
        )
        for line in p.stdout:
            t = time.time()
            d = json.loads(line)
            written[os.path.basename(d["path"])] = (t, d["changed"], d["bytes"])
        p.wait()

    g = threading.Thread(target=generate)
    g.start()
    deadline = time.time() + 3600
    sealed = []
    while True:
        v = sv.view(wid)
        sealed = v["watch"]["sealed"]
        # A trainer's save limit: keep the last two checkpoints on disk.
        for s in sealed[:-2]:
            shutil.rmtree(run / s["name"], ignore_errors=True)
        if len(sealed) >= a.steps and not g.is_alive():
            break
        if time.time() > deadline:
            sys.exit(f"the watch did not seal {a.steps} checkpoints: {v}")
        time.sleep(0.5)
    g.join()
    pushes = [p for p in v["watch"]["pushes"] if p["outcome"] == "sealed"]
    abandoned = sum(p["outcome"] == "abandoned" for p in v["watch"]["pushes"])
    rows = []
    for p in pushes:
        t, changed, total = written[p["name"]]
        at = datetime.datetime.fromisoformat(p["at"].replace("Z", "+00:00")).timestamp()
        rows.append(dict(name=p["name"], changed=changed, total=total, new=p["bytes_new"],
                         latency=at - t, own=p["latency_secs"], push=p["push_secs"]))
    sv.stop_agent()
    shutil.rmtree(run, ignore_errors=True)
    return rows, abandoned, du(Path(sv.env["SEALVOL_REPO"]))


def restic_run(work, a):
    run = work / "run2"
    repo = work / "restic"
    env = dict(os.environ, RESTIC_PASSWORD="bench", RESTIC_CACHE_DIR=str(work / "restic-cache"))
    sh("restic", "-r", str(repo), "init", env=env)
    growth = []
    p = subprocess.Popen(
        [sys.executable, str(GEN), str(run), "--gib", str(a.gib), "--steps", str(a.steps)],
        stdout=subprocess.PIPE, text=True,
    )
    for line in p.stdout:
        d = json.loads(line)
        before = du(repo)
        t = time.time()
        sh("restic", "-r", str(repo), "backup", "-q", "--host", "bench", d["path"], env=env)
        growth.append(dict(name=os.path.basename(d["path"]), new=du(repo) - before,
                           changed=d["changed"], secs=time.time() - t))
        shutil.rmtree(d["path"], ignore_errors=True)
    p.wait()
    shutil.rmtree(run, ignore_errors=True)
    return growth


def idle_cpu(binary, work, a, poll):
    home = work / ("idle-poll" if poll else "idle")
    sv = Sealvol(binary, home)
    ck = home / "run" / "checkpoint-1"
    for i in range(a.files):
        d = ck / f"part-{i % 100:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.bin").write_bytes(os.urandom(1024))
    sv.start_agent()
    args = ["volume", "watch", str(home / "run"), "w/idle", "--detach", "--settle", a.settle]
    if poll:
        args.append("--poll")
    wid = sv(*args).strip()
    while not sv.view(wid)["watch"]["sealed"]:
        time.sleep(0.2)
    time.sleep(3)
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.time(), cpu_ticks(sv.agent.pid)
    time.sleep(a.idle_secs)
    t1, c1 = time.time(), cpu_ticks(sv.agent.pid)
    sv.stop_agent()
    shutil.rmtree(home, ignore_errors=True)
    return (c1 - c0) / hz / (t1 - t0) * 100


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/var/tmp/sealvol-bench")
    ap.add_argument("--gib", type=float, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--settle", default="2s")
    ap.add_argument("--idle-secs", type=float, default=60)
    ap.add_argument("--files", type=int, default=10_000)
    a = ap.parse_args()
    sh("cargo", "build", "--release", "--quiet", "-p", "sealvol", capture=False)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = str((target / "release" / "sealvol").resolve())
    Path(a.work).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="watch.", dir=a.work))
    try:
        rows, abandoned, repo_bytes = watch_run(Sealvol(binary, work / "sv"), work, a)
        growth = restic_run(work, a)
        inotify = idle_cpu(binary, work, a, poll=False)
        polling = idle_cpu(binary, work, a, poll=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    mib = lambda b: f"{b / 2**20:,.1f} MiB"
    print(f"| checkpoint | changed | sealvol wrote | / changed | restic added | / changed | last write → sealed | push |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r, g in zip(rows, growth):
        ratio = lambda n: f"{n / r['changed']:.3f}" if r["changed"] else "-"
        print(f"| {r['name']} | {mib(r['changed'])} | {mib(r['new'])} | {ratio(r['new'])} | "
              f"{mib(g['new'])} | {ratio(g['new'])} | {r['latency']:.2f} s | {r['push']:.2f} s |")
    lat = [r["latency"] for r in rows]
    own = [r["own"] for r in rows if r["own"] is not None]
    later = [r for r in rows[1:] if r["changed"]]
    print()
    print(f"last write → sealed: median {statistics.median(lat):.2f} s, worst {max(lat):.2f} s "
          f"(the watch's own figure, from file stamps: median {statistics.median(own):.2f} s, "
          f"worst {max(own):.2f} s); settle {a.settle}")
    print(f"bytes written / changed, steps 2..{a.steps}: sealvol "
          f"{sum(r['new'] for r in later) / sum(r['changed'] for r in later):.3f}, restic "
          f"{sum(g['new'] for g in growth[1:]) / sum(r['changed'] for r in later):.3f}")
    print(f"pushes abandoned: {abandoned}; repository after: {mib(repo_bytes)}")
    print(f"idle CPU of a watch over {a.files:,} files, {a.idle_secs:.0f} s: "
          f"inotify {inotify:.3f}%, polling {polling:.3f}%")


if __name__ == "__main__":
    main()
