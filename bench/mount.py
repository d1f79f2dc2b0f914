#!/usr/bin/env python3
"""Mount benchmark: sealvol against casync and restic mounts of the same checkpoint,
side by side in one run. Prints a Markdown table for BENCHMARKS.md.

    python3 bench/mount.py --sealvol BIN --data DIR/v1 [--baseline BIN] [--runs 5] [--work DIR]

With --baseline (another build of sealvol, say the previous commit's), both builds are
measured in the same run, each on a repository of its own, their runs taking turns
(which goes first alternates), so a change can be judged against the code before it
rather than against old figures.

Measures, each as the median of --runs:
- mount ready: from starting the mount command until `ls` of the mount answers;
- the same for a 1 TiB logical volume (repeated content; see engine/core/examples/repeat_version.rs);
- time to first byte of a cold file (open + first 4 KiB read);
- cold sequential read of one ~512 MiB shard (nothing in the node cache, the mount's
  kernel page cache dropped; the origin repository may sit in the host page cache,
  as it does for the peers);
- warm read of the same shard after a remount: the shard, read whole once, is kept
  whole in the node cache and the kernel reads it directly (FUSE passthrough); timed
  from open, so it includes checking the cached file against its hash;
- peak RSS of the mount process after reading the whole 2 GiB version.
"""
import argparse, json, os, shutil, signal, statistics, subprocess, sys, time
from pathlib import Path

def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout

def wait_ready(path, timeout=60):
    t = time.time() + timeout
    while time.time() < t:
        try:
            if os.listdir(path):
                return
        except OSError:
            pass
        time.sleep(0.005)
    raise SystemExit(f"mount at {path} never became ready")

def umount(path):
    subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)
    subprocess.run(["umount", "-l", str(path)], capture_output=True)

def drop_file_cache(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)

def read_rate(path, bs=1 << 20):
    # Into one buffer, as dd does: a fresh bytes object per read would measure Python's
    # allocator, not the file system.
    buf = memoryview(bytearray(bs))
    t = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                break
            n += k
    return n / (time.perf_counter() - t), n

def ttfb(path):
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        f.read(4096)
    return time.perf_counter() - t

class Sealvol:
    def __init__(self, bin, work, data, name="sealvol"):
        self.name = name
        self.bin, self.work = bin, work
        tag = "" if name == "sealvol" else "-" + name.split("(")[-1].strip(")").replace(" ", "-")
        repo = work / f"sv-repo{tag}"
        self.env = dict(os.environ, SEALVOL_REPO=str(repo), SEALVOL_STATE=str(work / f"sv-state{tag}"))
        self.cache = work / f"sv-cache{tag}"
        if not repo.exists():
            sh(bin, "volume", "push", str(data), "bench/ckpt", env=self.env)
        out = sh(str(Path(bin).parent / "examples" / "repeat_version"), str(repo),
                 "bench/ckpt", "512", "bench/tib", env=self.env)
        self.big = out.strip()
    def mount(self, mnt, ref="bench/ckpt"):
        subprocess.run([self.bin, "-q", "volume", "mount", ref, str(mnt), "--cache", str(self.cache),
                        "--cache-size", "8G"], check=True, env=self.env)
    def pid(self, mnt):
        for m in json.loads(sh(self.bin, "volume", "mounts", "--json", env=self.env))["mounts"]:
            if m["dir"] == str(mnt):
                return m["pid"]
    def unmount(self, mnt):
        subprocess.run([self.bin, "-q", "volume", "unmount", str(mnt)], env=self.env)
    def clear_cache(self):
        shutil.rmtree(self.cache, ignore_errors=True)
    def wait_kept(self, timeout=60):
        # A file read whole is written whole into the node cache in the background.
        t = time.time() + timeout
        while time.time() < t:
            if any(p.is_file() for p in (self.cache / "files").rglob("*")):
                time.sleep(0.2)
                return
            time.sleep(0.05)
    def root(self, mnt):
        return mnt

class Casync:
    name = "casync"
    def __init__(self, work, data):
        self.store, self.idx = work / "ca-store", work / "ca.caidx"
        if not self.idx.exists():
            sh("casync", "make", f"--store={self.store}", str(self.idx), str(data))
        self.proc = None
    def mount(self, mnt):
        self.proc = subprocess.Popen(["casync", "mount", f"--store={self.store}", str(self.idx), str(mnt)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def pid(self, mnt):
        return self.proc.pid
    def unmount(self, mnt):
        umount(mnt)
        if self.proc:
            self.proc.wait()
    def clear_cache(self):
        pass
    def root(self, mnt):
        return mnt

class Restic:
    name = "restic"
    def __init__(self, work, data):
        self.repo = work / "restic-repo"
        self.env = dict(os.environ, RESTIC_REPOSITORY=str(self.repo), RESTIC_PASSWORD="bench")
        if not self.repo.exists():
            sh("restic", "init", env=self.env)
            sh("restic", "backup", str(data), env=self.env)
        self.data = data
        self.proc = None
    def mount(self, mnt):
        self.proc = subprocess.Popen(["restic", "mount", "--no-lock", str(mnt)], env=self.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def pid(self, mnt):
        return self.proc.pid
    def unmount(self, mnt):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            umount(mnt)
            self.proc.wait()
    def clear_cache(self):
        shutil.rmtree(Path.home() / ".cache" / "restic", ignore_errors=True)
    def root(self, mnt):
        return mnt / "snapshots" / "latest" / str(self.data).lstrip("/")

def vm_hwm(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0

def mount_point(tool, work):
    mnt = work / f"mnt-{tool.name.replace(' ', '-').replace('(', '').replace(')', '')}"
    umount(mnt)
    mnt.mkdir(exist_ok=True)
    return mnt


def one_run(tool, mnt, shard, ready, first, cold, warm):
    """One cold mount and read of `shard`, then (sealvol) a warm one from the node cache."""
    tool.clear_cache()
    t = time.perf_counter()
    tool.mount(mnt)
    wait_ready(tool.root(mnt) if tool.name != "restic" else mnt)
    ready.append(time.perf_counter() - t)
    root = tool.root(mnt)
    wait_ready(root)
    first.append(ttfb(root / shard.name))
    drop_file_cache(root / shard.name)
    cold.append(read_rate(root / shard.name)[0])
    if isinstance(tool, Sealvol):
        tool.unmount(mnt)
        tool.wait_kept()
        tool.mount(mnt)
        # Timed from open: includes checking the cached file's hash.
        warm.append(read_rate(mnt / shard.name)[0])
    tool.unmount(mnt)


def measure_turns(tools, work, runs, shard):
    """`measure` of several tools whose runs take turns, which one goes first
    alternating: two builds compared this way meet the same machine."""
    samples = {t.name: ([], [], [], []) for t in tools}
    mnts = {t.name: mount_point(t, work) for t in tools}
    for i in range(runs):
        for t in (tools if i % 2 == 0 else list(reversed(tools))):
            one_run(t, mnts[t.name], shard, *samples[t.name])
    return {t.name: measure(t, work, runs, shard, samples[t.name]) for t in tools}


def measure(tool, work, runs, shard, samples=None):
    mnt = mount_point(tool, work)
    r = {}
    if samples is None:
        samples = ([], [], [], [])
        for _ in range(runs):
            one_run(tool, mnt, shard, *samples)
    ready, first, cold, warm = samples
    r["ready"] = statistics.median(ready)
    r["ttfb"] = statistics.median(first)
    r["cold"] = statistics.median(cold)
    r["warm"] = statistics.median(warm) if warm else None
    r["samples"] = {"ready": ready, "ttfb": first, "cold": cold, "warm": warm}
    # Peak RSS reading the whole version.
    tool.clear_cache()
    tool.mount(mnt)
    root = tool.root(mnt)
    wait_ready(root)
    for f in sorted(os.listdir(root)):
        read_rate(root / f)
    r["rss"] = vm_hwm(tool.pid(mnt))
    tool.unmount(mnt)
    if isinstance(tool, Sealvol):
        big = []
        for _ in range(runs):
            t = time.perf_counter()
            tool.mount(mnt, tool.big)
            os.listdir(mnt)
            big.append(time.perf_counter() - t)
            tool.unmount(mnt)
        r["ready_tib"] = statistics.median(big)
    return r

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--baseline", help="another sealvol build to measure beside --sealvol")
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--work", default="/var/tmp/sealvol-bench/mount", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tools", default="sealvol,casync,restic")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    shard = sorted(a.data.glob("*.safetensors"))[0]
    tools = []
    for name in a.tools.split(","):
        if name == "sealvol":
            tools.append(Sealvol(a.sealvol, a.work, a.data))
            if a.baseline:
                tools.append(Sealvol(a.baseline, a.work, a.data, "sealvol (baseline)"))
        elif name == "casync":
            tools.append(Casync(a.work, a.data))
        elif name == "restic":
            tools.append(Restic(a.work, a.data))
    results = {}
    builds = [t for t in tools if isinstance(t, Sealvol)]
    if a.baseline and len(builds) == 2:
        results |= measure_turns(builds, a.work, a.runs, shard)
    for t in tools:
        if t.name in results:
            continue
        try:
            results[t.name] = measure(t, a.work, a.runs, shard)
        except Exception as e:  # a peer's mount dying should not lose the other rows
            print(f"{t.name}: failed: {e}", file=sys.stderr)
            umount(a.work / f"mnt-{t.name.replace(' ', '-').replace('(', '').replace(')', '')}")
    gb = lambda x: "-" if x is None else f"{x / 1e9:.2f} GB/s"
    print(f"\nShard: {shard.name} ({shard.stat().st_size / 2**20:.0f} MiB); median of {a.runs}\n")
    print("| tool | mount ready | ready, 1 TiB volume | TTFB cold | cold read | warm read (node cache) | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        tib = f"{r['ready_tib']*1000:.0f} ms" if "ready_tib" in r else "-"
        print(f"| {name} | {r['ready']*1000:.0f} ms | {tib} | {r['ttfb']*1000:.1f} ms | {gb(r['cold'])} | {gb(r['warm'])} | {r['rss'] / 2**20:.0f} MiB |")
    json.dump(results, open(a.work / "results.json", "w"), indent=1)

if __name__ == "__main__":
    main()
