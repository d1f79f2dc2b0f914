#!/usr/bin/env python3
"""What proving possession costs (issue 57): a durable push of a version, locally and
through `--remote`, beside another build (the commit before, say) in the same run,
interleaved; and a push through `--remote` of a version another namespace already
holds: the bytes the client sends (the server's own count of request bytes is not
kept, so a relay on loopback counts them) and the time, beside the first push of the
same version. Prints Markdown tables for BENCHMARKS.md.

    python3 bench/possession.py --sealvol BIN [--baseline BIN] --data DIR/v1 [--runs 3]

Durable: SEALVOL_FSYNC is left on (the default), as a user's push is.
"""
import argparse, os, shutil, socket, statistics, subprocess, sys, threading, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from serve import Server, files, sh, timed_push as timed  # noqa: E402


class Relay:
    """A TCP relay on loopback counting the bytes a client sends through it."""

    def __init__(self, target_port):
        self.sent = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.target = target_port
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self.pipe, args=(c, s, True), daemon=True).start()
            threading.Thread(target=self.pipe, args=(s, c, False), daemon=True).start()

    def pipe(self, a, b, count):
        try:
            while True:
                d = a.recv(1 << 20)
                if not d:
                    break
                if count:
                    with self.lock:
                        self.sent += len(d)
                b.sendall(d)
        except OSError:
            pass
        finally:
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--baseline")
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/sealvol-bench/possession"))
    a = ap.parse_args()
    work = a.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    data_bytes = sum(p.stat().st_size for p in files(a.data))
    builds = {"this commit": str(Path(a.sealvol).resolve())}
    if a.baseline:
        builds["before"] = str(Path(a.baseline).resolve())
    base = dict(os.environ, XDG_CACHE_HOME=str(work / "xdg-cache"))
    base.pop("SEALVOL_FSYNC", None)

    local = {b: [] for b in builds}
    remote = {b: [] for b in builds}
    for i in range(a.runs):
        for name, bin in builds.items():
            tag = f"{name.replace(' ', '-')}-{i}"
            e = dict(base, SEALVOL_REPO=str(work / f"l-{tag}"), SEALVOL_STATE=str(work / f"ls-{tag}"))
            local[name].append(timed(bin, e, a.data, "bench/ckpt"))
            shutil.rmtree(work / f"l-{tag}", ignore_errors=True)
            srv = dict(base, SEALVOL_REPO=str(work / f"r-{tag}"), SEALVOL_STATE=str(work / f"rs-{tag}"))
            sh(bin, "-q", "init", env=srv)
            server = Server(bin, srv, None)
            try:
                ce = dict(base, SEALVOL_REMOTE=server.url, SEALVOL_API_KEY=server.key,
                          SEALVOL_STATE=str(work / f"c-{tag}"))
                remote[name].append(timed(bin, ce, a.data, "bench/ckpt"))
            finally:
                server.stop()
            shutil.rmtree(work / f"r-{tag}", ignore_errors=True)

    print(f"Durable push of {data_bytes / 2**30:.2f} GiB into an empty repository, "
          f"median of {a.runs} (interleaved):\n")
    print("| push | " + " | ".join(f"{b} (s)" for b in builds) +
          (" | this / before |" if a.baseline else " |"))
    print("|---|" + "---|" * (len(builds) + (1 if a.baseline else 0)))
    for what, rows in (("local repository", local), ("through `--remote`", remote)):
        meds = {b: statistics.median(v) for b, v in rows.items()}
        line = f"| {what} | " + " | ".join(f"{meds[b]:.2f}" for b in builds)
        if a.baseline:
            line += f" | {meds['this commit'] / meds['before']:.3f}"
        print(line + " |")

    # Another namespace holds the version: team-a pushes the same bytes with its key.
    bin = builds["this commit"]
    first, again, moved = [], [], []
    for i in range(a.runs):
        srv = dict(base, SEALVOL_REPO=str(work / f"x-{i}"), SEALVOL_STATE=str(work / f"xs-{i}"))
        sh(bin, "-q", "init", env=srv)
        server = Server(bin, srv, None)
        try:
            team_b = sh(bin, "-q", "key", "create", "b", "--namespace", "team-b", env=srv).strip()
            team_a = sh(bin, "-q", "key", "create", "a", "--namespace", "team-a", env=srv).strip()
            port = int(server.url.rsplit(":", 1)[1])
            eb = dict(base, SEALVOL_REMOTE=server.url, SEALVOL_API_KEY=team_b,
                      SEALVOL_STATE=str(work / f"xb-{i}"))
            first.append(timed(bin, eb, a.data, "team-b/ckpt"))
            relay = Relay(port)
            ea = dict(base, SEALVOL_REMOTE=f"http://127.0.0.1:{relay.port}", SEALVOL_API_KEY=team_a,
                      SEALVOL_STATE=str(work / f"xa-{i}"))
            again.append(timed(bin, ea, a.data, "team-a/ckpt"))
            moved.append(relay.sent)
        finally:
            server.stop()
        shutil.rmtree(work / f"x-{i}", ignore_errors=True)
    f, g, m = statistics.median(first), statistics.median(again), statistics.median(moved)
    print(f"\nThrough `--remote`, {data_bytes / 2**30:.2f} GiB another namespace already holds, "
          f"median of {a.runs}:\n")
    print("| push | seconds | bytes sent by the client | × the data |")
    print("|---|---|---|---|")
    print(f"| team-b, first (everything new) | {f:.2f} | - | - |")
    print(f"| team-a, the same bytes (proven, not uploaded) | {g:.2f} | {m / 1e6:.2f} MB | {m / data_bytes:.4f} |")


if __name__ == "__main__":
    main()
