#!/usr/bin/env python3
"""A sync run by the server against the same sync run by the caller: the checkpoint in a
bucket on a loopback S3 API server (moto), synced

  - directly: `sealvol volume sync s3://bench/ckpt NS/NAME` into a local repository;
  - through `--remote`: the same command against a `sealvol serve` (its own empty
    repository each run), which runs the job; the client follows it to READY through a
    relay that counts every byte it sends and receives (tests/servers/slow_proxy.py).

Prints a Markdown table: median wall time, and the client's bytes for the remote runs.

    python3 bench/server_sync.py --sealvol BIN --data DIR/v1 [--runs 3] [--work DIR]
"""
import argparse, os, re, shutil, socket, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port):
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/sealvol-bench-server-sync"))
    a = ap.parse_args()
    work = a.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [moto]
    try:
        wait_port(port)
        env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                   AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                   AWS_ENDPOINT_URL=endpoint)
        subprocess.run(["python3", str(ROOT / "tests/servers/s3_seed.py"), endpoint, "bench",
                        "ckpt", str(a.data)], check=True, env=env)
        total = sum(p.stat().st_size for p in a.data.rglob("*") if p.is_file())
        direct, remote, client_bytes = [], [], []

        def direct_run():
            repo, state = work / "direct-repo", work / "direct-state"
            shutil.rmtree(repo, ignore_errors=True)
            shutil.rmtree(state, ignore_errors=True)
            e = dict(env, SEALVOL_REPO=str(repo), SEALVOL_STATE=str(state))
            subprocess.run(["sync"])
            t = time.perf_counter()
            subprocess.run([a.sealvol, "-q", "volume", "sync", "s3://bench/ckpt", "bench/ckpt"],
                           check=True, env=e, stdout=subprocess.DEVNULL)
            return time.perf_counter() - t

        def remote_run(i):
            repo, state = work / "server-repo", work / "server-state"
            shutil.rmtree(repo, ignore_errors=True)
            shutil.rmtree(state, ignore_errors=True)
            e = dict(env, SEALVOL_REPO=str(repo), SEALVOL_STATE=str(state))
            subprocess.run([a.sealvol, "-q", "init"], check=True, env=e)
            server = subprocess.Popen(
                [a.sealvol, "serve", "--listen", "127.0.0.1:0", "--jobs-use-server-credentials",
                 "--cache", str(work / "server-cache")],
                env=e, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(server)
            line = server.stdout.readline()
            sport = int(line.strip().rsplit(":", 1)[1])
            key = subprocess.run([a.sealvol, "-q", "key", "create", f"bench{i}"], env=e,
                                 check=True, capture_output=True, text=True).stdout.strip()
            count = work / f"relay-{i}.count"
            relay = subprocess.Popen(
                ["python3", str(ROOT / "tests/servers/slow_proxy.py"), str(sport), "0", "-", "0"],
                env=dict(os.environ, RELAY_COUNT=str(count)), stdout=subprocess.PIPE, text=True)
            procs.append(relay)
            rport = int(relay.stdout.readline().strip().rsplit(" ", 1)[1])
            client = dict(os.environ, SEALVOL_REMOTE=f"http://127.0.0.1:{rport}",
                          SEALVOL_API_KEY=key, SEALVOL_STATE=str(work / f"client-{i}"))
            client.pop("AWS_ENDPOINT_URL", None)
            subprocess.run(["sync"])
            t = time.perf_counter()
            subprocess.run([a.sealvol, "-q", "volume", "sync", "s3://bench/ckpt", "bench/ckpt",
                            "--wait"], check=True, env=client, stdout=subprocess.DEVNULL)
            took = time.perf_counter() - t
            moved = 0
            for l in count.read_text().splitlines():
                moved += int(l.split()[1])
            relay.terminate()
            server.terminate()
            server.wait()
            return took, moved

        for i in range(a.runs):
            direct.append(direct_run())
            t, b = remote_run(i)
            remote.append(t)
            client_bytes.append(b)
        d, r = statistics.median(direct), statistics.median(remote)
        gib = total / 2**30
        print(f"| {gib:.2f} GiB from moto on loopback | median of {a.runs} | throughput | vs direct | client bytes |")
        print("| --- | --- | --- | --- | --- |")
        print(f"| `volume sync` (the caller syncs) | {d:.2f} s | {total / d / 1e6:.0f} MB/s | 1.00× | {total / 2**20:.0f} MiB and more |")
        print(f"| `--remote volume sync --wait` (the server syncs) | {r:.2f} s | {total / r / 1e6:.0f} MB/s | {r / d:.2f}× | {statistics.median(client_bytes) / 1024:.1f} KiB |")
        print()
        print("direct:", ", ".join(f"{x:.2f}" for x in direct))
        print("remote:", ", ".join(f"{x:.2f}" for x in remote))
        print("client bytes:", ", ".join(str(x) for x in client_bytes))
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


if __name__ == "__main__":
    main()
