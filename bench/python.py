#!/usr/bin/env python3
"""The Python package against the same version through a mount and the CLI, side by
side in one run (issue 61's targets). Prints a Markdown table for BENCHMARKS.md.

    python3 bench/python.py --sealvol BIN [--checkpoint DIR] [--mib 512] [--runs 3] [--work DIR]

Run with the tests' virtual environment (the installed wheel): target/test-tools/venv.
`--checkpoint DIR`: a checkpoint of `../shared/bench/gen_checkpoints.py` (its `v1`, four
shards of about 512 MiB): the largest shard is the file read, the four shards the four
files; else files of `--mib` MiB of noise are made. Measures, each the median of --runs:
- sequential `open().readinto` of one file, 1 MiB at a time, cold (a fresh node cache,
  the host's page cache dropped) and warm (the node cache filled, the page cache
  dropped), against `dd bs=1M` through a mount, cold and warm the same way;
- four threads each reading one of four files against four `dd`s through a mount
  (cold), aggregate;
- the cold read again through `sealvol serve` on loopback, for both;
- `tensors().get` of the tensor nearest 4 MiB of the shard: bytes the process read from
  disk for it (`rchar` of /proc/self/io), against the tensor's size;
- `pull` from Python against `sealvol volume pull`;
- `import sealvol`.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        pass


def rchar():
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work")
    ap.add_argument("--checkpoint")
    a = ap.parse_args()
    import numpy as np
    import sealvol
    from safetensors.numpy import save_file

    work = Path(a.work or tempfile.mkdtemp(prefix="sealvol-bench-python-"))
    env = dict(os.environ, SEALVOL_REPO=str(work / "repo"), SEALVOL_STATE=str(work / "state"),
               XDG_CACHE_HOME=str(work / "xdg-cache"), XDG_CONFIG_HOME=str(work / "xdg-config"))
    os.environ.update(env)
    if a.checkpoint:
        src = Path(a.checkpoint)
        shards = sorted(src.glob("*.safetensors"), key=lambda p: p.stat().st_size)[-4:]
    else:
        src = work / "src"
        src.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        tensors = {f"layer.{i}": rng.standard_normal((1024, 1024), dtype=np.float32)
                   for i in range(a.mib // 4)}
        save_file(tensors, str(src / "model.safetensors"))
        for i in range(4):
            with open(src / f"part-{i}.bin", "wb") as f:
                for _ in range(max(a.mib // 4 // 64, 1)):
                    f.write(os.urandom(64 << 20))
        shards = [src / f"part-{i}.bin" for i in range(4)] + [src / "model.safetensors"]
    shard = shards[-1].name
    four = [p.name for p in shards[:4]]
    size = (src / shard).stat().st_size
    four_size = sum((src / n).stat().st_size for n in four)
    client = sealvol.Client()
    v = client.push(src, "bench/py")
    runs = iter(range(1_000_000))
    med = statistics.median
    rows = []

    def fresh():
        # A node cache never used (a fresh node), and the host's page cache dropped. A
        # new folder each time, once the last one's writers are done (a file read whole
        # is written whole into the node cache after it is closed: competing for the
        # disk, it slowed the next cold read by a third).
        settle()
        for old in work.glob("xdg-cache-*"):
            shutil.rmtree(old, ignore_errors=True)
        cache = work / f"xdg-cache-{next(runs)}"
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"] = str(cache)
        drop_caches()

    def settle():
        if not Path(env["XDG_CACHE_HOME"]).exists():
            return
        # The node cache is filled in the background: let it finish, then drop the
        # page cache, so that "warm" is a node whose cache holds the file on disk.
        def used():
            return sum(p.stat().st_size for p in Path(env["XDG_CACHE_HOME"]).rglob("*") if p.is_file())
        last, now = -1, used()
        while now != last:
            time.sleep(1)
            last, now = now, used()
        drop_caches()

    def py_read(client, name):
        buf = bytearray(1 << 20)
        with client.open(v.ref, name) as f:
            while f.readinto(buf):
                pass

    def py_four(client):
        threads = [threading.Thread(target=py_read, args=(client, n)) for n in four]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def dd(mnt, name):
        return subprocess.Popen(["dd", f"if={mnt}/{name}", "of=/dev/null", "bs=1M"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def dd_one(mnt, name):
        assert dd(mnt, name).wait() == 0

    def dd_four(mnt):
        procs = [dd(mnt, n) for n in four]
        assert all(p.wait() == 0 for p in procs)

    def with_mount(env, f):
        mnt = work / "mnt"
        mnt.mkdir(exist_ok=True)
        subprocess.run([a.sealvol, "volume", "mount", v.ref, str(mnt)], check=True, env=env,
                       capture_output=True)
        try:
            return f(mnt)
        finally:
            subprocess.run([a.sealvol, "volume", "unmount", str(mnt)], env=env, capture_output=True)

    py = {"cold": [], "warm": [], "four": []}
    for _ in range(a.runs):
        fresh()
        client = sealvol.Client()
        py["cold"].append(timed(lambda: py_read(client, shard)))
        settle()
        py["warm"].append(timed(lambda: py_read(client, shard)))
        fresh()
        client = sealvol.Client()
        py["four"].append(timed(lambda: py_four(client)))
    mnt_t = {"cold": [], "warm": [], "four": []}
    for _ in range(a.runs):
        fresh()

        def both(mnt):
            mnt_t["cold"].append(timed(lambda: dd_one(mnt, shard)))
            settle()
            mnt_t["warm"].append(timed(lambda: dd_one(mnt, shard)))
        with_mount(env, both)
        fresh()
        with_mount(env, lambda mnt: mnt_t["four"].append(timed(lambda: dd_four(mnt))))
    mb, four_mb = size / (1 << 20), four_size / (1 << 20)
    for what, label, n in [("cold", "open().readinto, cold", mb), ("warm", "open().readinto, warm", mb),
                           ("four", "four threads, four files, cold (aggregate)", four_mb)]:
        rows.append((f"{label} ({n:.0f} MiB)", f"{n / med(py[what]):.0f} MiB/s",
                     f"dd through a mount: {n / med(mnt_t[what]):.0f} MiB/s",
                     f"{med(mnt_t[what]) / med(py[what]):.2f}×"))

    # Through `sealvol serve` on loopback: both read the same server.
    server = subprocess.Popen([a.sealvol, "serve", "--listen", "127.0.0.1:0"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = server.stdout.readline().strip().split("listening on ")[1]
        key = (work / "state" / "serve" / "admin.key").read_text().strip()
        remote_env = dict(env, SEALVOL_REMOTE=url, SEALVOL_API_KEY=key)
        py_s, mnt_s = [], []
        for _ in range(a.runs):
            fresh()
            client = sealvol.Client(remote=url, api_key=key, state=str(work / "remote-state"))
            py_s.append(timed(lambda: py_read(client, shard)))
            fresh()
            renv = dict(remote_env, XDG_CACHE_HOME=env["XDG_CACHE_HOME"])
            with_mount(renv, lambda mnt: mnt_s.append(timed(lambda: dd_one(mnt, shard))))
        rows.append((f"open().readinto through serve, cold ({mb:.0f} MiB)", f"{mb / med(py_s):.0f} MiB/s",
                     f"dd through a mount of serve: {mb / med(mnt_s):.0f} MiB/s",
                     f"{med(mnt_s) / med(py_s):.2f}×"))
    finally:
        server.kill()
        server.wait()

    fresh()
    client = sealvol.Client()
    tensor_file = next(n for n in reversed([p.name for p in shards]) if n.endswith(".safetensors"))
    t = client.tensors(v.ref, tensor_file)
    name = min(t.keys(), key=lambda k: abs((t.info(k).end - t.info(k).begin) - (4 << 20)))
    nbytes = t.info(name).end - t.info(name).begin
    before = rchar()
    got = t.get_bytes(name)
    moved = rchar() - before
    assert len(got) == nbytes
    rows.append((f"tensors().get, one tensor of {nbytes / (1 << 20):.1f} MiB, cold",
                 f"{moved / (1 << 20):.1f} MiB read", f"the tensor: {nbytes / (1 << 20):.1f} MiB",
                 f"{moved / nbytes:.2f}× its size"))

    py_pull, cli_pull = [], []
    for i in range(a.runs):
        fresh()
        client = sealvol.Client()
        py_pull.append(timed(lambda: client.pull(v.ref, work / f"py-{i}")))
        fresh()
        cli_pull.append(timed(lambda: subprocess.run([a.sealvol, "volume", "pull", v.ref, str(work / f"cli-{i}")], check=True, env=env, capture_output=True)))
        shutil.rmtree(work / f"py-{i}")
        shutil.rmtree(work / f"cli-{i}")
    rows.append(("pull, cold", f"{med(py_pull):.2f} s", f"sealvol volume pull: {med(cli_pull):.2f} s", f"{med(cli_pull) / med(py_pull):.2f}×"))
    imports = [timed(lambda: subprocess.run([sys.executable, "-c", "import sealvol"], check=True)) for _ in range(a.runs)]
    base = [timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True)) for _ in range(a.runs)]
    rows.append(("import sealvol", f"{(med(imports) - med(base)) * 1000:.0f} ms", "over a bare interpreter", ""))

    print("| measure | Python | against | ratio |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
