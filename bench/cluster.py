#!/usr/bin/env python3
"""The emulated cluster: an origin, cache servers and nodes, each host a network
namespace of its own on one bridge (netns.py), with real processes in each.

- The origin is moto's S3 (tests/servers/moto_serial.py) holding the repository,
  behind a link shaped to `--origin-rate` and a proxy that delays every byte by
  `--delay` each way (netns.Delay). The proxy's byte counts are the origin's traffic:
  everything any server or node read from the bucket.
- Cache servers are `sealvol serve` of the bucket, each with its own state and cache,
  one ring listed in a peers file that every server and node reads; their keys are
  shared through the repository (`sealvol key share`), and the nodes hold one
  read-only key.
- Nodes are `sealvol volume mount` processes reading through the peers file, each
  with its own state and node cache. Mount points live in the machine's one mount
  namespace (processes enter only the network namespace, with `nsenter --net`), so
  this script reads them from outside: one thread per node, all released at once.

    cluster.py check --sealvol BIN --mib 512 [--quick] [--json OUT]
        the scenarios tests/cluster.rs asserts on: a gang of 8 nodes through 3 servers
        (cold), the same while a server is killed halfway, a 4th server joining (not
        with --quick), and three nodes reading while a server is frozen (SIGSTOP);
        prints one JSON object.
    cluster.py bench --sealvol BIN --mib 2048
        times a cold gang read: 1 node alone; 8 nodes through 1 server and through 3;
        8 straight from the origin. Prints a table and JSON.

Needs root (network namespaces, FUSE), iproute2, util-linux's nsenter, and moto with
boto3 (scripts/test.sh installs them in its virtual environment; run this with that
python3 first on PATH).
"""

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns  # noqa: E402

SERVERS_DIR = os.path.join(HERE, "..", "tests", "servers")
MOTO_PORT = 5000
PROXY_PORT = 6000
SERVE_PORT = 7420
BUCKET = "models"
REPO = f"s3://{BUCKET}/team"


def noise(path, mib, seed):
    """`mib` MiB of incompressible bytes, the same for the same seed."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        block = hashlib.sha256(f"seed {seed}".encode()).digest()
        for i in range(mib * 4):
            # 256 KiB pieces from a counter-mode SHAKE: fast and deterministic.
            piece = hashlib.shake_256(block + i.to_bytes(8, "little")).digest(256 << 10)
            f.write(piece)
            h.update(piece)
    return h.hexdigest()


class Emulated:
    def __init__(self, sealvol, work, origin_rate, link_rate, delay):
        self.sealvol = sealvol
        self.work = work
        self.link_rate = link_rate
        self.procs = []  # long-running processes, killed at close
        self.servers = {}  # index -> (Popen, ns, ip, state, cache)
        self.nodes = {}  # index -> (ns, state, cache)
        self.mounted = []
        self.cluster = netns.Cluster()
        try:
            self._start_origin(origin_rate, delay)
        except BaseException:
            self.close()
            raise

    # -- processes ----------------------------------------------------------------

    def env(self, endpoint=None, key=None):
        e = dict(os.environ)
        e.update({
            "SEALVOL_REPO": REPO,
            "AWS_ENDPOINT_URL": endpoint or self.endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true",
        })
        e.pop("SEALVOL_API_KEY", None)
        if key:
            e["SEALVOL_API_KEY"] = key
        return e

    def sealvol_in(self, ns, state, args, endpoint=None, key=None, check=True):
        """Runs `sealvol --state STATE ARGS` in namespace `ns`; returns its stdout."""
        cmd = ["nsenter", f"--net=/run/netns/{ns}", self.sealvol, "--state", state] + args
        r = subprocess.run(cmd, env=self.env(endpoint, key), capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def spawn(self, ns, cmd, env=None, log=None):
        out = open(log, "ab") if log else subprocess.DEVNULL
        p = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}"] + cmd, env=env,
                             stdout=subprocess.PIPE, stderr=out)
        self.procs.append(p)
        return p

    def path(self, *parts):
        p = os.path.join(self.work, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    # -- the origin ---------------------------------------------------------------

    def _start_origin(self, rate, delay):
        ns, ip = self.cluster.add("origin", rate)
        self.origin_ns = ns
        self.direct = f"http://127.0.0.1:{MOTO_PORT}"
        self.spawn(ns, [sys.executable, os.path.join(SERVERS_DIR, "moto_serial.py"),
                        "127.0.0.1", str(MOTO_PORT)], env=dict(os.environ))
        deadline = time.time() + 60
        while True:
            r = subprocess.run(
                ["nsenter", f"--net=/run/netns/{ns}", sys.executable,
                 os.path.join(SERVERS_DIR, "s3_seed.py"), self.direct, "--bucket", BUCKET],
                env=self.env(self.direct), capture_output=True, text=True)
            if r.returncode == 0:
                break
            if time.time() > deadline:
                raise RuntimeError(f"moto did not start: {r.stderr.strip()[-400:]}")
            time.sleep(0.2)
        self.counts = self.path("origin-counts")
        self.spawn(ns, [sys.executable, os.path.join(HERE, "netns.py"), "delay",
                        f"{ip}:{PROXY_PORT}", f"127.0.0.1:{MOTO_PORT}", str(delay),
                        self.counts], env=dict(os.environ))
        while not os.path.exists(self.counts):
            time.sleep(0.05)
        self.endpoint = f"http://{ip}:{PROXY_PORT}"
        self.origin_state = self.path("origin", "state")
        # Made beside the origin, not through its link: setting up costs no traffic.
        self.sealvol_in(ns, self.origin_state, ["init"], endpoint=self.direct)

    def origin_bytes(self):
        """Bytes the origin sent so far, once the proxy has written its counts."""
        time.sleep(0.3)
        with open(self.counts) as f:
            return int(f.read().split()[1])

    def push(self, src, volume):
        out = self.sealvol_in(self.origin_ns, self.origin_state,
                              ["volume", "push", src, volume, "--json"], endpoint=self.direct)
        return json.loads(out)["ref"]

    # -- cache servers ------------------------------------------------------------

    def ring_file(self):
        return self.path("ring")

    def write_ring(self, indexes):
        tmp = self.ring_file() + ".tmp"
        with open(tmp, "w") as f:
            for i in indexes:
                f.write(f"http://{self.servers[i][2]}:{SERVE_PORT}\n")
        os.replace(tmp, self.ring_file())

    def add_server(self, i):
        ns, ip = self.cluster.add(f"s{i}", self.link_rate)
        state, cache = self.path(f"s{i}", "state"), self.path(f"s{i}", "cache")
        self.servers[i] = (None, ns, ip, state, cache)
        if not os.path.exists(self.ring_file()):
            open(self.ring_file(), "w").close()
        self.start_server(i)
        if len(self.servers) == 1:
            # The first server's keys go to the repository: every server takes them.
            self.sealvol_in(self.origin_ns, state, ["key", "share"], endpoint=self.direct)
            self.node_key = self.sealvol_in(
                self.origin_ns, state, ["key", "create", "nodes", "--read-only"],
                endpoint=self.direct).strip()

    def start_server(self, i):
        _, ns, ip, state, cache = self.servers[i]
        p = self.spawn(ns, [self.sealvol, "--state", state, "serve",
                            "--listen", f"{ip}:{SERVE_PORT}", "--insecure-http", "--no-jobs",
                            "--cache", cache, "--cache-size", "8G",
                            "--peers-file", self.ring_file()],
                       env=self.env(), log=self.path(f"s{i}", "log"))
        line = p.stdout.readline().decode()
        if not line.startswith("listening on"):
            raise RuntimeError(f"server {i} did not start: {line!r}; see {self.path(f's{i}', 'log')}")
        self.servers[i] = (p, ns, ip, state, cache)

    def freeze_server(self, i, frozen):
        """SIGSTOP (it keeps its connections and answers nothing) or SIGCONT."""
        self.servers[i][0].send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    def kill_server(self, i):
        p = self.servers[i][0]
        p.send_signal(signal.SIGKILL)
        p.wait()

    def reports(self, via_node=0):
        """`sealvol peers --json` from a node: each server's own figures, by address."""
        ns, state, _ = self.nodes[via_node]
        out = self.sealvol_in(ns, state, ["peers", "--peers-file", self.ring_file(), "--json"],
                              key=self.node_key)
        return {p["url"]: p for p in json.loads(out)["peers"]}

    def wait_ring(self, n, via_node=0):
        """Until every listed server has taken a ring of `n` (they look once a second)."""
        deadline = time.time() + 60
        while True:
            r = self.reports(via_node)
            if len(r) == n and all(p.get("ring") == n for p in r.values()):
                return
            if time.time() > deadline:
                raise RuntimeError(f"the servers never took a ring of {n}: {r}")
            time.sleep(0.3)

    # -- nodes --------------------------------------------------------------------

    def add_node(self, i):
        ns, _ = self.cluster.add(f"n{i}", self.link_rate)
        self.nodes[i] = (ns, self.path(f"n{i}", "state"), self.path(f"n{i}", "cache"))

    def mount(self, i, ref, label, peers=True):
        ns, state, cache = self.nodes[i]
        d = self.path(f"n{i}", "mnt", label)
        os.makedirs(d, exist_ok=True)
        args = ["volume", "mount", ref, d, "--cache", f"{cache}-{label}"]
        if peers:
            args += ["--peers-file", self.ring_file()]
        self.sealvol_in(ns, state, args, key=self.node_key)
        self.mounted.append((i, d))
        return d

    def mount_stats(self, i, d):
        ns, state, _ = self.nodes[i]
        out = self.sealvol_in(ns, state, ["volume", "mounts", "--json"])
        for m in json.loads(out)["mounts"]:
            if m["dir"] == d:
                return m
        raise RuntimeError(f"no mount at {d}")

    def unmount_all(self):
        """Unmounts every node's mounts and deletes their node caches (a gang of 8
        nodes reading 1 GiB fills 8 GiB of disk)."""
        for i, d in self.mounted:
            ns, state, cache = self.nodes[i]
            self.sealvol_in(ns, state, ["volume", "unmount", d], check=False)
            shutil.rmtree(f"{cache}-{os.path.basename(d)}", ignore_errors=True)
        self.mounted = []

    def close(self):
        try:
            self.unmount_all()
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            self.cluster.close()
            shutil.rmtree(self.work, ignore_errors=True)


def gang_read(paths, halfway=None):
    """Reads every file in `paths` (one thread each), all released at once. With
    `halfway`, each reads half, all wait, `halfway()` runs, and they read the rest.
    Returns, per path, (sha256, bytes, seconds)."""
    n = len(paths)
    start = threading.Barrier(n)
    middle = threading.Barrier(n, action=halfway) if halfway else None
    out = [None] * n

    def read(k):
        size = os.path.getsize(paths[k])
        h = hashlib.sha256()
        got = 0
        waiting = middle
        with open(paths[k], "rb", buffering=0) as f:
            start.wait()
            t0 = time.monotonic()
            while True:
                if waiting and got >= size // 2:
                    waiting.wait()
                    waiting = None
                b = f.read(4 << 20)
                if not b:
                    break
                h.update(b)
                got += len(b)
            out[k] = (h.hexdigest(), got, time.monotonic() - t0)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def source(work, name, mib, seed):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    return d, noise(os.path.join(d, "w.bin"), mib, seed)


def node_rows(em, mounts, res):
    rows = []
    for (i, d), (sha, got, secs) in zip(mounts, res):
        m = em.mount_stats(i, d)
        st = m["stats"]
        rows.append({
            "node": i, "sha256": sha, "bytes": got, "seconds": round(secs, 3),
            "peer_bytes": st.get("peer_bytes", 0), "origin_bytes": st.get("origin_bytes", 0),
            "memory_peak": st.get("memory_peak", 0), "memory_bound": st.get("memory_bound", 0),
            "errors": st.get("errors", 0), "peer_late": st.get("peer_late", 0),
        })
    return rows


def server_rows(em, before=None):
    """Each server's figures since `before`; a server that is down says only that."""
    out = {}
    for url, r in em.reports().items():
        if not r.get("up"):
            out[url] = {"up": False}
            continue
        b = (before or {}).get(url, {})
        out[url] = {k: r.get(k, 0) - b.get(k, 0)
                    for k in ("bytes_served", "origin_bytes", "fellow_bytes", "forwarded_in")}
        out[url]["up"] = r.get("up", False)
    return out


def gang(em, ref, label, nodes, halfway=None):
    """Mounts `ref` on `nodes` and reads it on all at once: what each read, what the
    origin sent meanwhile (mounting included), and what each server did."""
    before_servers = {u: r for u, r in em.reports().items() if r.get("up")}
    before = em.origin_bytes()
    mounts = [(i, em.mount(i, ref, label)) for i in nodes]
    res = gang_read([os.path.join(d, "w.bin") for _, d in mounts], halfway)
    return {
        "origin_bytes": em.origin_bytes() - before,
        "nodes": node_rows(em, mounts, res),
        "servers": server_rows(em, before_servers),
        "seconds": round(max(r[2] for r in res), 3),
    }


def check(a):
    """The scenarios tests/cluster.rs asserts on."""
    work = tempfile.mkdtemp(prefix="sealvol-cluster-", dir=a.work)
    em = Emulated(a.sealvol, work, a.origin_rate, a.link_rate, a.delay)
    try:
        src1, sha1 = source(work, "v1", a.mib, 1)
        src2, sha2 = source(work, "v2", a.mib // 2, 2)
        ref1 = em.push(src1, "weights/gang")
        ref2 = em.push(src2, "weights/gang")
        for i in range(3):
            em.add_server(i)
        for i in range(a.nodes):
            em.add_node(i)
        em.write_ring([0, 1, 2])
        em.wait_ring(3)
        nodes = list(range(a.nodes))
        out = {"bytes": a.mib << 20, "sha256": sha1}
        # 1. A cold gang through a ring of three.
        out["gang"] = gang(em, ref1, "gang", nodes)
        em.unmount_all()
        # 2. A fourth server joins; fresh nodes read the same version again (left out
        # by --quick: its figures are shares, which a small version cannot show).
        em.add_server(3)
        em.write_ring([0, 1, 2, 3])
        em.wait_ring(4)
        if not a.quick:
            out["joined"] = gang(em, ref1, "joined", nodes)
            out["joined_url"] = f"http://{em.servers[3][2]}:{SERVE_PORT}"
            em.unmount_all()
        # 3. Another version, read cold while one server is killed halfway.
        killed = f"http://{em.servers[1][2]}:{SERVE_PORT}"
        out["killed"] = gang(em, ref2, "killed", nodes, halfway=lambda: em.kill_server(1))
        out["killed"]["bytes"] = (a.mib // 2) << 20
        out["killed"]["sha256"] = sha2
        out["killed_url"] = killed
        em.unmount_all()
        # 4. A ring of three again (0, 2, 3); a third version read by three nodes with
        # all up, then by three fresh nodes while server 2 is frozen (SIGSTOP: it
        # accepts connections and answers nothing) and thawed only afterwards.
        src3, sha3 = source(work, "v3", a.mib // 2, 3)
        ref3 = em.push(src3, "weights/gang")
        em.write_ring([0, 2, 3])
        em.wait_ring(3)
        three = nodes[:3]
        healthy = gang(em, ref3, "healthy", three)
        em.unmount_all()
        # --quick mounts before the freeze: a mount started while a server is frozen
        # waits out one request's timeout (30 s) on it, which the whole check shows.
        early = [(i, em.mount(i, ref3, "frozen")) for i in three] if a.quick else None
        em.freeze_server(2, True)
        try:
            mounts = early or [(i, em.mount(i, ref3, "frozen")) for i in three]
            res = gang_read([os.path.join(d, "w.bin") for _, d in mounts])
            rows = node_rows(em, mounts, res)
        finally:
            em.freeze_server(2, False)
        out["frozen"] = {
            "healthy_seconds": healthy["seconds"],
            "seconds": round(max(r[2] for r in res), 3),
            "nodes": rows,
            "bytes": (a.mib // 2) << 20,
            "sha256": sha3,
            "frozen_url": f"http://{em.servers[2][2]}:{SERVE_PORT}",
        }
        em.unmount_all()
    finally:
        em.close()
    print(json.dumps(out, indent=1))


def bench(a):
    """Cold gang reads side by side, on one origin: every cache emptied between them."""
    work = tempfile.mkdtemp(prefix="sealvol-cluster-", dir=a.work)
    em = Emulated(a.sealvol, work, a.origin_rate, a.link_rate, a.delay)
    rows = []
    try:
        src, sha = source(work, "v", a.mib, 7)
        ref = em.push(src, "weights/bench")
        for i in range(3):
            em.add_server(i)
        for i in range(a.nodes):
            em.add_node(i)

        def fresh(servers):
            for i in list(em.servers):
                p = em.servers[i][0]
                if p.poll() is None:
                    em.kill_server(i)
                subprocess.run(["rm", "-rf", em.servers[i][4]])
            em.write_ring(servers)
            for i in servers:
                em.start_server(i)
            if servers:
                em.wait_ring(len(servers))

        for name, servers, nodes, peers in [
            ("1 node, 3 servers", [0, 1, 2], [0], True),
            ("8 nodes, 3 servers", [0, 1, 2], list(range(a.nodes)), True),
            ("8 nodes, 1 server", [0], list(range(a.nodes)), True),
            ("8 nodes, origin only", [0], list(range(a.nodes)), False),
        ]:
            fresh(servers)
            before = em.origin_bytes()
            label = name.replace(" ", "").replace(",", "-")
            mounts = [(i, em.mount(i, ref, label, peers)) for i in nodes]
            mount_pids = [em.mount_stats(i, d)["pid"] for i, d in mounts]
            server_pids = [em.servers[i][0].pid for i in servers]
            cpu0 = (cpu_seconds(server_pids), cpu_seconds(mount_pids))
            res = gang_read([os.path.join(d, "w.bin") for _, d in mounts])
            cpu1 = (cpu_seconds(server_pids), cpu_seconds(mount_pids))
            ok = all(r[0] == sha for r in res)
            rows.append({
                "what": name, "nodes": len(nodes), "servers": len(servers) if peers else 0,
                "seconds": round(max(r[2] for r in res), 2),
                "origin_ratio": round((em.origin_bytes() - before) / (a.mib << 20), 3),
                # CPU seconds the servers and the mounts spent on the read.
                "server_cpu": round(cpu1[0] - cpu0[0], 2) if peers else 0.0,
                "mount_cpu": round(cpu1[1] - cpu0[1], 2),
                "bytes_ok": ok,
            })
            em.unmount_all()
    finally:
        em.close()
    one = rows[0]["seconds"]
    print(f"{'what':<24} {'seconds':>8} {'x one node':>10} {'origin/data':>12} "
          f"{'server cpu':>10} {'mount cpu':>9}  bytes")
    for r in rows:
        r["vs_one_node"] = round(r["seconds"] / one, 2)
        print(f"{r['what']:<24} {r['seconds']:>8} {r['vs_one_node']:>10} "
              f"{r['origin_ratio']:>12} {r['server_cpu']:>10} {r['mount_cpu']:>9}  "
              f"{'ok' if r['bytes_ok'] else 'WRONG'}")
    print(json.dumps({"mib": a.mib, "origin_rate": a.origin_rate, "link_rate": a.link_rate,
                      "delay": a.delay, "cores": os.cpu_count(), "rows": rows}))


def cpu_seconds(pids):
    """User and system CPU seconds `pids` have used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["check", "bench"])
    p.add_argument("--sealvol", required=True)
    p.add_argument("--mib", type=int, default=512)
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--origin-rate", default="800mbit")
    p.add_argument("--link-rate", default="8gbit")
    p.add_argument("--delay", type=float, default=0.02)
    p.add_argument("--work", default=None, help="where the cluster's files go (a temporary folder)")
    p.add_argument("--quick", action="store_true",
                   help="check: leave out the server that joins (its shares need a large version)")
    p.add_argument("--timeout", type=int, default=1800,
                   help="seconds the whole run may take; then it stops and cleans up")
    a = p.parse_args(argv)

    def too_long(signum, frame):
        raise TimeoutError(f"the run took more than {a.timeout} s")

    # Raised in the main thread, so every `finally` runs: mounts, processes and
    # namespaces are removed however the run ends.
    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(a.timeout)
    if not netns.can_make_namespaces():
        raise SystemExit("cannot make network namespaces here: run as root with iproute2")
    {"check": check, "bench": bench}[a.what](a)


if __name__ == "__main__":
    main(sys.argv[1:])
