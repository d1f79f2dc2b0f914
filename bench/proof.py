#!/usr/bin/env python3
"""What proving costs (issue 31): every byte a mount serves is proven against its file's
BLAKE3 tree, and a push builds each file's proof. This runs the same reads and pushes
with two builds of sealvol in one run, each on a repository of its own, alternating
run by run, so that the machine's noise falls on both:

    python3 bench/proof.py --sealvol NEW --baseline OLD --data DIR/v1 [--runs 3] [--work DIR]

Measures, each the median of --runs:
- cold `dd` of the largest shard (~512 MiB) through a fresh mount with an empty node
  cache (the repository's packs in the page cache: the mount, not the disk);
- warm `dd` of it after a remount, once the node cache keeps it whole;
- the mmap walk of every shard (every tensor in offset order, a byte in each page),
  cold, as bench/read.py runs it;
- a push of the checkpoint into an empty local repository (durable, fsync on);
- the same push through `--remote`, to a `sealvol serve` of the same build over an
  empty repository on loopback (which proves every list it stores by reading it).
Prints a Markdown table for BENCHMARKS.md: before, after, and after / before.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mount import read_rate, umount, wait_ready  # noqa: E402
from read import WALK, shards, timed_child  # noqa: E402
from serve import Server  # noqa: E402


def sh(*args, env=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return p.stdout


class Build:
    def __init__(self, name, bin, work, data):
        self.name, self.bin, self.work = name, str(Path(bin).resolve()), work / name
        self.env = dict(os.environ, SEALVOL_REPO=str(self.work / "repo"),
                        SEALVOL_STATE=str(self.work / "state"))
        self.mnt, self.cache = self.work / "mnt", self.work / "cache"
        self.work.mkdir(parents=True)
        sh(self.bin, "-q", "volume", "push", str(data), "bench/ckpt", env=dict(self.env, SEALVOL_FSYNC="0"))
        sh("sync")

    def mount(self, cold):
        umount(self.mnt)
        if cold:
            shutil.rmtree(self.cache, ignore_errors=True)
        self.mnt.mkdir(parents=True, exist_ok=True)
        sh(self.bin, "-q", "volume", "mount", "bench/ckpt", str(self.mnt), "--cache", str(self.cache),
           "--cache-size", "8G", env=self.env)
        wait_ready(self.mnt)
        return self.mnt

    def unmount(self):
        subprocess.run([self.bin, "-q", "volume", "unmount", str(self.mnt)], env=self.env)

    def dd(self, shard):
        """Cold, then (after a remount, the shard kept whole) warm."""
        cold, _ = read_rate(self.mount(True) / shard)
        self.unmount()  # waits for the shard to be kept whole
        warm, _ = read_rate(self.mount(False) / shard)
        self.unmount()
        return cold, warm

    def walk(self):
        mnt = self.mount(True)
        t, _ = timed_child(WALK, shards(mnt))
        self.unmount()
        return t

    def push(self, data, i):
        env = dict(self.env, SEALVOL_REPO=str(self.work / f"push{i}"), SEALVOL_STATE=str(self.work / f"pst{i}"))
        t = time.perf_counter()
        sh(self.bin, "-q", "volume", "push", str(data), "bench/ckpt", env=env)
        return time.perf_counter() - t

    def push_remote(self, data, i):
        srv = dict(self.env, SEALVOL_REPO=str(self.work / f"remote{i}"), SEALVOL_STATE=str(self.work / f"srv{i}"))
        sh(self.bin, "-q", "init", env=srv)
        server = Server(self.bin, srv, self.work / f"scache{i}")
        try:
            client = dict(self.env, SEALVOL_REMOTE=server.url, SEALVOL_API_KEY=server.key,
                          SEALVOL_STATE=str(self.work / f"cst{i}"))
            t = time.perf_counter()
            sh(self.bin, "-q", "volume", "push", str(data), "bench/ckpt", env=client)
            return time.perf_counter() - t
        finally:
            server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/sealvol-bench/proof"))
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    builds = [Build("before", a.baseline, a.work, a.data), Build("after", a.sealvol, a.work, a.data)]
    shard = max(shards(a.data), key=lambda p: p.stat().st_size).name
    size = (a.data / shard).stat().st_size
    got = {b.name: {"cold": [], "warm": [], "walk": [], "push": [], "remote": []} for b in builds}
    for i in range(a.runs):
        # Alternating which goes first, so neither always meets a warmer machine.
        for b in builds if i % 2 == 0 else builds[::-1]:
            r = got[b.name]
            cold, warm = b.dd(shard)
            r["cold"].append(cold)
            r["warm"].append(warm)
            r["walk"].append(b.walk())
            r["push"].append(b.push(a.data, i))
            r["remote"].append(b.push_remote(a.data, i))
    data_gib = sum(p.stat().st_size for p in a.data.rglob("*") if p.is_file()) / 2**30
    med = {n: {k: statistics.median(v) for k, v in r.items()} for n, r in got.items()}
    print(f"Median of {a.runs}; shard {shard} ({size / 2**20:.0f} MiB), checkpoint {data_gib:.2f} GiB.\n")
    print("| measure | before | after | after / before |")
    print("| --- | ---: | ---: | ---: |")
    rows = [("cold dd (GB/s, higher is better)", "cold", lambda x: f"{x / 1e9:.2f}", True),
            ("warm dd (GB/s)", "warm", lambda x: f"{x / 1e9:.2f}", True),
            ("mmap walk, cold (s, lower is better)", "walk", lambda x: f"{x:.2f}", False),
            ("push, local, durable (s)", "push", lambda x: f"{x:.2f}", False),
            ("push through --remote (s)", "remote", lambda x: f"{x:.2f}", False)]
    for label, k, fmt, _ in rows:
        b, n = med["before"][k], med["after"][k]
        print(f"| {label} | {fmt(b)} | {fmt(n)} | {n / b:.3f} |")
    print("\nAll runs:", json.dumps(got))


if __name__ == "__main__":
    main()
