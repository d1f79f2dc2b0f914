#!/usr/bin/env python3
"""S3 benchmark: sealvol's repository on moto_server against rclone on the same
server, side by side in one run. Prints a Markdown table for BENCHMARKS.md.

    python3 bench/s3.py --sealvol BIN --shared DIR [--gib 2] [--data DIR] [--work DIR] [--runs 3]

Measures on the checkpoint series of ../shared/bench/gen_checkpoints.py:
- push of v1 into `s3://sealvol-bench/repo` against `rclone copy v1 moto:rclone-bench/ckpt`;
- re-push of v2 (the last 10% of layers fine-tuned) against `rclone copy v2` over v1's
  copy (rclone sends each changed file whole); and what each sent against the bytes
  that differ between v1 and v2 (4 KiB blocks);
- a cold sequential read of one shard through `sealvol volume mount` (empty node
  cache) against `rclone mount` with `--vfs-cache-mode full` and `off`, from starting
  the mount to the last byte (the unmount is timed apart);
- requests for each, counted from moto's own request log, per GiB moved.
The reads run `--runs` times (3), taking turns, and the median run is reported.
Needs: moto[server], rclone, numpy, fuse3.
"""
import argparse, collections, json, os, shutil, socket, subprocess, sys, time
from pathlib import Path


def sh(*args, env=None):
    return subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def dir_bytes(d):
    return sum(p.stat().st_size for p in Path(d).rglob("*") if p.is_file())


def changed_bytes(a, b, block=4096):
    import numpy as np
    total = 0
    for pa in sorted(Path(a).rglob("*")):
        if not pa.is_file():
            continue
        pb = Path(b) / pa.relative_to(a)
        x = np.fromfile(pa, dtype=np.uint8)
        y = np.fromfile(pb, dtype=np.uint8) if pb.exists() else np.zeros(0, np.uint8)
        n = min(len(x), len(y))
        whole = n // block * block
        if whole:
            diff = (x[:whole].reshape(-1, block) != y[:whole].reshape(-1, block)).any(axis=1)
            total += int(diff.sum()) * block
        if n > whole and not np.array_equal(x[whole:n], y[whole:n]):
            total += n - whole
        total += abs(len(x) - len(y))
    return total


class Moto:
    def __init__(self, work):
        self.port = free_port()
        self.log = work / "moto.log"
        self.proc = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port)).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("moto_server did not start")

    def requests(self):
        """Requests logged so far (werkzeug logs one line per request)."""
        return sum(1 for l in open(self.log, errors="replace") if '" 2' in l or '" 3' in l or '" 4' in l or '" 5' in l)


# What a measure returns when only part of its run counts.
Timed = collections.namedtuple("Timed", "secs note")


def read_file(path, bs=1 << 20):
    t = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(bs)
            if not b:
                break
            n += len(b)
    return n, time.perf_counter() - t


def wait_ready(path, timeout=60):
    t = time.time() + timeout
    while time.time() < t:
        try:
            if os.listdir(path):
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"{path} never became ready")


def umount(path):
    subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--gib", type=float, default=2)
    ap.add_argument("--work", default="/var/tmp/sealvol-bench/s3")
    ap.add_argument("--data", help="a checkpoint series made before (its v1 and v2 are used)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each cold read (the median is reported)")
    a = ap.parse_args()
    bin = str(Path(a.sealvol).resolve())
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    data = Path(a.data) if a.data else work / "data"
    if not (data / "v2").exists():
        sh(sys.executable, str(Path(a.shared) / "bench/gen_checkpoints.py"), str(data), "--gib", str(a.gib))
    for d in ("state", "cache", "rc-cache", "mnt", "mnt-full", "mnt-off"):
        shutil.rmtree(work / d, ignore_errors=True)
    v1, v2 = data / "v1", data / "v2"
    gib = dir_bytes(v1) / (1 << 30)
    moto = Moto(work)
    ep = f"http://127.0.0.1:{moto.port}"
    # rclone refuses a custom CA bundle on plain HTTP; loopback needs none.
    base = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    env = dict(base, AWS_ENDPOINT_URL=ep, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
               AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", SEALVOL_REPO="s3://sealvol-bench/repo",
               SEALVOL_STATE=str(work / "state"),
               RCLONE_CONFIG_MOTO_TYPE="s3", RCLONE_CONFIG_MOTO_PROVIDER="Other",
               RCLONE_CONFIG_MOTO_ENDPOINT=ep, RCLONE_CONFIG_MOTO_ACCESS_KEY_ID="bench",
               RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY="bench", RCLONE_CONFIG_MOTO_FORCE_PATH_STYLE="true")
    rows = []

    def once(fn):
        r0 = moto.requests()
        t = time.perf_counter()
        extra = fn()
        secs = time.perf_counter() - t
        if isinstance(extra, Timed):
            secs, extra = extra
        return secs, moto.requests() - r0, extra

    def row(name, runs, moved_bytes):
        """One table row from the runs of one measure: the median run's seconds and
        requests, and every run's seconds in the note when there were several."""
        runs = sorted(runs, key=lambda r: r[0])
        secs, reqs, extra = runs[len(runs) // 2]
        if len(runs) > 1:
            extra = f"median of {len(runs)}: " + " / ".join(f"{s:.2f}" for s, _, _ in runs) + " s" + (
                f"; {extra}" if extra else "")
        rows.append((name, secs, moved_bytes / secs / 1e6, reqs, reqs / (moved_bytes / (1 << 30)), extra or ""))
        print(rows[-1], file=sys.stderr)

    def measure(name, fn, moved_bytes):
        row(name, [once(fn)], moved_bytes)

    try:
        sh("rclone", "mkdir", "moto:sealvol-bench", env=env)
        sh("rclone", "mkdir", "moto:rclone-bench", env=env)
        sh(bin, "init", env=env)
        v1_bytes, v2_changed = dir_bytes(v1), changed_bytes(v1, v2)

        def push(d):
            def run():
                out = json.loads(sh(bin, "volume", "push", str(d), "bench/ckpt", "--json", env=env))
                sent = out["requests"]["bytes_sent"]
                return f"sent {sent / 1e6:.0f} MB" + (f" = {sent / v2_changed:.2f} × the changed bytes" if d == v2 else "")
            return run

        def rclone(d):
            def run():
                sh("rclone", "copy", "--transfers", "4", str(d), "moto:rclone-bench/ckpt", env=env)
                return None if d == v1 else "(each changed file whole)"
            return run

        measure("sealvol push v1", push(v1), v1_bytes)
        measure("rclone copy v1", rclone(v1), v1_bytes)
        measure("sealvol push v2 (re-push)", push(v2), v2_changed)
        measure("rclone copy v2 over v1", rclone(v2), v2_changed)

        shard = max((p for p in v1.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
        rel = shard.relative_to(v1)

        def read_through(mnt, start, stop):
            """A cold read as a model server sees it: from starting the mount to the
            shard's last byte. The unmount after it is timed apart, in the note (sealvol
            waits there for the shard to be kept whole in the node cache)."""
            def run():
                mnt.mkdir(parents=True, exist_ok=True)
                t = time.perf_counter()
                start()
                try:
                    wait_ready(mnt)
                    n, _ = read_file(mnt / rel)
                    assert n == shard.stat().st_size, n
                    secs = time.perf_counter() - t
                finally:
                    u = time.perf_counter()
                    stop()
                return Timed(secs, f"unmount {time.perf_counter() - u:.2f} s")
            return run

        # Each read measure runs `--runs` times, the three tools taking turns so that a
        # slow moment of the machine falls on all of them; every run starts cold (node
        # cache and rclone's cache emptied; an unmount drops the kernel's pages).
        procs = []

        def sealvol_mount(mnt=work / "mnt"):
            def start():
                shutil.rmtree(work / "cache", ignore_errors=True)
                sh(bin, "-q", "volume", "mount", "bench/ckpt", str(mnt),
                   "--cache", str(work / "cache"), "--cache-size", "8G", env=env)
            return read_through(mnt, start, lambda: subprocess.run([bin, "-q", "volume", "unmount", str(mnt)], env=env))

        def rclone_mount(mode):
            mnt = work / f"mnt-{mode}"
            def start():
                shutil.rmtree(work / "rc-cache" / mode, ignore_errors=True)
                procs.append(subprocess.Popen(
                    ["rclone", "mount", "moto:rclone-bench/ckpt", str(mnt), "--vfs-cache-mode", mode, "--read-only",
                     "--cache-dir", str(work / "rc-cache" / mode)], env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            def stop():
                umount(mnt)
                procs[-1].wait()
            return read_through(mnt, start, stop)

        readers = [
            (f"sealvol mount, cold read of {rel} ({shard.stat().st_size >> 20} MiB)", sealvol_mount()),
            ("rclone mount --vfs-cache-mode full, cold read", rclone_mount("full")),
            ("rclone mount --vfs-cache-mode off, cold read", rclone_mount("off")),
        ]
        runs = {name: [] for name, _ in readers}
        for _ in range(a.runs):
            for name, fn in readers:
                runs[name].append(once(fn))
                print(name, runs[name][-1], file=sys.stderr)
        for name, _ in readers:
            row(name, runs[name], shard.stat().st_size)
    finally:
        moto.proc.kill()

    print(f"Checkpoint: {gib:.2f} GiB in {sum(1 for p in v1.rglob('*') if p.is_file())} files; "
          f"v2 differs from v1 in {v2_changed / 1e6:.0f} MB (4 KiB blocks).\n")
    print("| what | seconds | MB/s | requests | per GiB | note |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for name, secs, rate, reqs, per, extra in rows:
        print(f"| {name} | {secs:.2f} | {rate:.0f} | {reqs} | {per:.0f} | {extra} |")


if __name__ == "__main__":
    main()
