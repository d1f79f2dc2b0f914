#!/usr/bin/env python3
"""Sync benchmark: sealvol against `rclone copy` and `aws s3 sync` of the same bucket on a
loopback S3 API server (moto), side by side in one run. Prints a Markdown table.

    python3 bench/sync.py --sealvol BIN --data DIR/v1 [--runs 3] [--work DIR]

Each run starts from nothing: sealvol syncs into an empty repository (it writes the
repository, no full copy of the files; by default it fsyncs what it writes, "fsync off"
does not, like the peers); rclone and aws download the files to a local folder. `sync`
runs before each, so that no tool pays for another's writeback. Reported: median wall time and throughput over --runs, and sealvol's re-sync of
the unchanged bucket (nothing fetched). The machine's AWS_CA_BUNDLE is unset for rclone,
which rejects it with a custom endpoint (LoadCustomCABundleError); sealvol and aws run
with it set.
"""
import argparse, os, shutil, socket, statistics, subprocess, sys, time
from pathlib import Path

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

def timed(cmd, env, **kw):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    return time.perf_counter() - t

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/sealvol-bench-sync"))
    a = ap.parse_args()
    work = a.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                   AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
        subprocess.run(["python3", str(Path(__file__).parent.parent / "tests/servers/s3_seed.py"),
                        endpoint, "bench", "ckpt", str(a.data)], check=True, env=env)
        total = sum(p.stat().st_size for p in a.data.rglob("*") if p.is_file())
        rows = {}

        def sealvol_run(i, keep=False, fsync=True):
            # One repository, emptied before each cold run: the disk holds one copy.
            repo, state = work / "sv-repo", work / "sv-state"
            if not keep:
                shutil.rmtree(repo, ignore_errors=True)
                shutil.rmtree(state, ignore_errors=True)
            e = dict(env, SEALVOL_REPO=str(repo), SEALVOL_STATE=str(state), AWS_ENDPOINT_URL=endpoint,
                     SEALVOL_FSYNC="1" if fsync else "0")
            subprocess.run(["sync"])
            return timed([a.sealvol, "-q", "volume", "sync", "s3://bench/ckpt", "bench/ckpt"], e)

        def rclone_run(i):
            out = work / f"rclone-{i}"
            shutil.rmtree(out, ignore_errors=True)
            e = {k: v for k, v in env.items() if k != "AWS_CA_BUNDLE"}
            e.update(RCLONE_CONFIG_M_TYPE="s3", RCLONE_CONFIG_M_PROVIDER="Other",
                     RCLONE_CONFIG_M_ENDPOINT=endpoint, RCLONE_CONFIG_M_ACCESS_KEY_ID="bench",
                     RCLONE_CONFIG_M_SECRET_ACCESS_KEY="bench", RCLONE_CONFIG_M_FORCE_PATH_STYLE="true")
            subprocess.run(["sync"])
            t = timed(["rclone", "copy", "--transfers", "8", "m:bench/ckpt", str(out)], e)
            shutil.rmtree(out, ignore_errors=True)
            return t

        def aws_run(i):
            out = work / f"aws-{i}"
            shutil.rmtree(out, ignore_errors=True)
            t = timed(["aws", "--endpoint-url", endpoint, "s3", "sync", "s3://bench/ckpt", str(out),
                       "--only-show-errors"], env)
            shutil.rmtree(out, ignore_errors=True)
            return t

        tools = [("sealvol volume sync", sealvol_run),
                 ("sealvol volume sync, fsync off", lambda i: sealvol_run(i, fsync=False))]
        if shutil.which("rclone"):
            tools.append(("rclone copy --transfers 8", rclone_run))
        if shutil.which("aws") and not os.environ.get("BENCH_SKIP_AWS"):
            tools.append(("aws s3 sync", aws_run))
        for i in range(a.runs):
            # Interleaved, so that the machine's noise falls on every tool alike.
            for name, fn in tools:
                rows.setdefault(name, []).append(fn(i))
                print(f"run {i + 1}: {name} {rows[name][-1]:.2f} s", file=sys.stderr)
        resync = [sealvol_run(0, keep=True) for _ in range(a.runs)]
        shutil.rmtree(work / "sv-repo", ignore_errors=True)

        base = statistics.median(rows["sealvol volume sync"])
        print(f"| {total / 2**30:.2f} GiB from moto on loopback | median s | MB/s | time vs sealvol |")
        print("| --- | --- | --- | --- |")
        for name, ts in rows.items():
            m = statistics.median(ts)
            print(f"| {name} | {m:.2f} | {total / m / 1e6:.0f} | {m / base:.2f}× |")
        m = statistics.median(resync)
        print(f"| sealvol re-sync, unchanged bucket | {m:.2f} | - | - |")
    finally:
        moto.terminate()
        moto.wait()

if __name__ == "__main__":
    main()
