#!/usr/bin/env python3
"""In-cluster cache tier benchmark (issue 19): four mounts on this machine reading the
same version cold, through one `sealvol serve` and, beside it in the same run, each
from the origin itself; and a push through `--remote` beside a direct push. Prints
Markdown tables for BENCHMARKS.md.

    python3 bench/serve.py --sealvol BIN --data DIR/v1 [--runs 3] [--work DIR]
    python3 bench/serve.py --sealvol BIN --baseline OTHER_BIN --data DIR/v1 [--runs 5]

With --baseline: this build beside another in one run, the builds taking turns (which
goes first alternates, so that neither always meets a warmer machine), each reading
through a server of its own build and pushing through one: medians and ratios.

Measures, each the median of --runs, every run with empty node caches, through a
server started as an operator starts it over a local repository (no chunk cache: its
packs already are on this machine's disks) and through one given `--cache` (empty):
- origin bytes read for the four mounts (the server's `origin_bytes_total`, or the
  mounts' own `origin_bytes` without a server), as a multiple of the data;
- aggregate throughput: 4 × the data over the wall time of four readers, one per
  mount, reading every file at once in 1 MiB reads;
- p50 / p99 latency of a run request to the peer, from the mounts' own histograms
  (`--metrics`; bucket upper bounds, so the figures are bounds, not exact values);
- push of the version into an empty repository directly, and through `--remote` to a
  `sealvol serve` over an empty repository on this machine (loopback HTTP).
The repository is local and its packs stay in the page cache: what is measured is the
tier, not the disk.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, threading, time, urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mount import wait_ready  # noqa: E402

MOUNTS = 4


def sh(*args, env=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return p.stdout


def files(root):
    return sorted(p for p in Path(root).rglob("*") if p.is_file())


def read_all(root, out, i):
    n = 0
    for p in files(root):
        with open(p, "rb", buffering=0) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                n += len(b)
    out[i] = n


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def quantile(buckets, bounds, q):
    n = sum(buckets)
    if n == 0:
        return None
    want, seen = max(1, int(n * q + 0.999999)), 0
    for i, b in enumerate(buckets):
        seen += b
        if seen >= want:
            return bounds[i] if i < len(bounds) else float("inf")
    return None


BOUNDS_US = [100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000,
             250_000, 500_000, 1_000_000, 2_500_000, 10_000_000]


class Server:
    def __init__(self, bin, env, cache):
        """`cache`: the server's chunk cache folder, or None for `serve` as started over a
        local repository (no chunk cache)."""
        args = [bin, "serve", "--listen", "127.0.0.1:0"]
        if cache is not None:
            args += ["--cache", str(cache), "--cache-size", "8G"]
        self.p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        line = self.p.stdout.readline().strip()
        self.url = line.removeprefix("listening on ")
        self.key = (Path(env["SEALVOL_STATE"]) / "serve" / "admin.key").read_text().strip()

    def metrics(self):
        req = urllib.request.Request(self.url + "/metrics", headers={"Authorization": "Bearer " + self.key})
        return urllib.request.urlopen(req).read().decode()

    def usage(self):
        """Peak RSS (MiB) and CPU seconds (user + system) of the server so far."""
        status = Path(f"/proc/{self.p.pid}/status").read_text()
        hwm = next(int(l.split()[1]) for l in status.splitlines() if l.startswith("VmHWM:"))
        fields = Path(f"/proc/{self.p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return hwm / 1024, (int(fields[11]) + int(fields[12])) / ticks

    def stop(self):
        self.p.terminate()
        self.p.wait()


def four_mounts(bin, env, work, ref, data_bytes, server):
    mnts, records = [], []
    for i in range(MOUNTS):
        mnt, cache = work / f"mnt{i}", work / f"node-cache{i}"
        shutil.rmtree(cache, ignore_errors=True)
        mnt.mkdir(parents=True, exist_ok=True)
        args = [bin, "-q", "volume", "mount", ref, str(mnt), "--cache", str(cache), "--cache-size", "8G",
                "--metrics", "127.0.0.1:0"]
        e = dict(env)
        if server:
            args += ["--peer", server.url]
            e["SEALVOL_API_KEY"] = server.key
        subprocess.run(args, check=True, env=e)
        wait_ready(mnt)
        mnts.append(mnt)
    out = [0] * MOUNTS
    t = time.perf_counter()
    threads = [threading.Thread(target=read_all, args=(m, out, i)) for i, m in enumerate(mnts)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    assert all(n == data_bytes for n in out), out
    time.sleep(1.2)  # the records are published every second
    recs = {m["dir"]: m for m in json.loads(sh(bin, "volume", "mounts", "--json", env=env))["mounts"]}
    buckets = [0] * 16
    origin = 0
    for m in mnts:
        st = recs[str(m)]["stats"]
        origin += st["origin_bytes"]
        for i, b in enumerate(st.get("peer_latency", {}).get("buckets", [0] * 16)):
            buckets[i] += b
    for m in mnts:
        subprocess.run([bin, "-q", "volume", "unmount", str(m)], env=env)
    rss, cpu = None, None
    if server:
        origin = metric(server.metrics(), "sealvol_serve_origin_bytes_total")
        rss, cpu = server.usage()
    return {
        "rss_mib": rss,
        # CPU seconds the server spent per GB it served (four mounts' worth of data).
        "cpu_per_gb": None if cpu is None else cpu / (MOUNTS * data_bytes / 1e9),
        "origin_x": origin / data_bytes,
        "gbs": MOUNTS * data_bytes / wall / 1e9,
        "p50_ms": (quantile(buckets, BOUNDS_US, 0.5) or 0) / 1000,
        "p99_ms": (quantile(buckets, BOUNDS_US, 0.99) or 0) / 1000,
    }


def timed_push(bin, env, data, ref):
    t = time.perf_counter()
    sh(bin, "-q", "volume", "push", str(data), ref, env=env)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/sealvol-bench/serve"))
    ap.add_argument("--baseline", help="another sealvol build to measure beside --sealvol")
    a = ap.parse_args()
    bin, work = str(Path(a.sealvol).resolve()), a.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    data_bytes = sum(p.stat().st_size for p in files(a.data))
    # A default cache folder of the bench's own (emptied before each server), so that a
    # build that keeps one there starts as cold as any.
    env = dict(os.environ, SEALVOL_REPO=str(work / "repo"), SEALVOL_STATE=str(work / "state"),
               SEALVOL_FSYNC="0", XDG_CACHE_HOME=str(work / "xdg-cache"))
    ref = sh(bin, "-q", "volume", "push", str(a.data), "bench/ckpt", env=env).strip().splitlines()[-1]
    if a.baseline:
        return beside(bin, str(Path(a.baseline).resolve()), env, work, ref, a.data, data_bytes, a.runs)

    served = {"through one serve (as started: no chunk cache)": None,
              "through one serve with --cache": work / "serve-cache"}
    rows = {name: [] for name in served} | {"each from the origin": []}
    for _ in range(a.runs):
        for name, cache in served.items():
            shutil.rmtree(work / "xdg-cache", ignore_errors=True)
            if cache is not None:
                shutil.rmtree(cache, ignore_errors=True)
            server = Server(bin, env, cache)
            try:
                rows[name].append(four_mounts(bin, env, work, ref, data_bytes, server))
            finally:
                server.stop()
        rows["each from the origin"].append(four_mounts(bin, env, work, ref, data_bytes, None))

    print(f"Four mounts reading {data_bytes / 2**30:.2f} GiB cold at once, median of {a.runs}:\n")
    print("| read | origin bytes (× data) | aggregate GB/s | peer run p50 | peer run p99 | server peak RSS | server CPU s / GB served |")
    print("|---|---|---|---|---|---|---|")
    for name, rs in rows.items():
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        served = name.startswith("through")
        lat = (f"≤ {med('p50_ms'):g} ms", f"≤ {med('p99_ms'):g} ms") if served else ("-", "-")
        use = (f"{med('rss_mib'):.0f} MiB", f"{med('cpu_per_gb'):.2f}") if served else ("-", "-")
        print(f"| {name} | {med('origin_x'):.2f} | {med('gbs'):.2f} | {lat[0]} | {lat[1]} | {use[0]} | {use[1]} |")

    direct, remote = [], []
    for i in range(a.runs):
        e = dict(env, SEALVOL_REPO=str(work / f"push-direct{i}"), SEALVOL_STATE=str(work / f"push-state{i}"))
        direct.append(timed_push(bin, e, a.data, "bench/ckpt"))
        remote.append(remote_push(bin, env, work, a.data, str(i)))
    d, r = statistics.median(direct), statistics.median(remote)
    print(f"\nPush of {data_bytes / 2**30:.2f} GiB into an empty repository, median of {a.runs}:\n")
    print("| push | seconds | GB/s | × direct |")
    print("|---|---|---|---|")
    print(f"| direct (local repository) | {d:.2f} | {data_bytes / d / 1e9:.2f} | 1.00 |")
    print(f"| through `--remote` (loopback `sealvol serve`) | {r:.2f} | {data_bytes / r / 1e9:.2f} | {r / d:.2f} |")


def remote_push(bin, env, work, data, tag):
    """A push through `--remote` to a server of the same build over an empty repository."""
    srv_env = dict(env, SEALVOL_REPO=str(work / f"push-remote-{tag}"), SEALVOL_STATE=str(work / f"srv-state-{tag}"))
    sh(bin, "-q", "init", env=srv_env)
    server = Server(bin, srv_env, None)
    try:
        ce = dict(env, SEALVOL_REMOTE=server.url, SEALVOL_API_KEY=server.key,
                  SEALVOL_STATE=str(work / f"client-state-{tag}"))
        return timed_push(bin, ce, data, "bench/ckpt")
    finally:
        server.stop()
        shutil.rmtree(work / f"push-remote-{tag}", ignore_errors=True)


def beside(bin, base, env, work, ref, data, data_bytes, runs):
    builds = {"baseline": base, "this build": bin}
    reads = {b: [] for b in builds}
    pushes = {b: [] for b in builds}
    for i in range(runs):
        order = list(builds) if i % 2 == 0 else list(reversed(builds))
        for b in order:
            shutil.rmtree(work / "xdg-cache", ignore_errors=True)
            server = Server(builds[b], env, None)
            try:
                reads[b].append(four_mounts(builds[b], env, work, ref, data_bytes, server))
            finally:
                server.stop()
        for b in order:
            pushes[b].append(remote_push(builds[b], env, work, data, f"{i}-{b.replace(' ', '-')}"))
    med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    print(f"Four mounts reading {data_bytes / 2**30:.2f} GiB cold at once through one serve (no chunk cache), "
          f"and a push through `--remote`, median of {runs}, the builds taking turns:\n")
    print("| build | aggregate GB/s | server CPU s / GB served | push through `--remote` s |")
    print("|---|---|---|---|")
    for b in builds:
        print(f"| {b} | {med(reads[b], 'gbs'):.2f} | {med(reads[b], 'cpu_per_gb'):.2f} | {statistics.median(pushes[b]):.2f} |")
    rb, rn = med(reads["baseline"], "gbs"), med(reads["this build"], "gbs")
    pb, pn = statistics.median(pushes["baseline"]), statistics.median(pushes["this build"])
    print(f"| this build ÷ baseline | {rn / rb:.2f}× | | {pn / pb:.2f}× the time |")


if __name__ == "__main__":
    main()
