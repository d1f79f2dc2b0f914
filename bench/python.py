#!/usr/bin/env python3
"""The Python package against the same version through a mount and the CLI, side by
side in one run (issue 61's targets). Prints a Markdown table for BENCHMARKS.md.

    python3 bench/python.py --sealvol BIN [--mib 512] [--runs 3] [--work DIR]

Run with the tests' virtual environment (the installed wheel): target/test-tools/venv.
Measures, each the median of --runs:
- sequential `open().readinto` of one file, 1 MiB at a time, cold (a fresh node cache,
  the host's page cache dropped) and warm, against `dd bs=1M` through a mount, cold and
  warm the same way;
- `tensors().get` of one 4 MiB tensor of a large .safetensors file: bytes the process
  read from disk for it (`rchar` of /proc/self/io), against the tensor's size;
- `pull` from Python against `sealvol volume pull`;
- `import sealvol`.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
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
    a = ap.parse_args()
    import numpy as np
    import sealvol
    from safetensors.numpy import save_file

    work = Path(a.work or tempfile.mkdtemp(prefix="sealvol-bench-python-"))
    env = dict(os.environ, SEALVOL_REPO=str(work / "repo"), SEALVOL_STATE=str(work / "state"),
               XDG_CACHE_HOME=str(work / "xdg-cache"), XDG_CONFIG_HOME=str(work / "xdg-config"))
    os.environ.update(env)
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    size = a.mib << 20
    with open(src / "shard.bin", "wb") as f:
        for _ in range(a.mib // 64):
            f.write(os.urandom(64 << 20))
    rng = np.random.default_rng(0)
    tensors = {f"layer.{i}": rng.standard_normal((1024, 1024), dtype=np.float32) for i in range(a.mib // 4)}
    save_file(tensors, str(src / "model.safetensors"))
    client = sealvol.Client()
    v = client.push(src, "bench/py")
    runs = iter(range(1_000_000))

    def fresh():
        # A node cache never used (a fresh node), and the host's page cache dropped. A
        # new folder each time: an earlier client's cache filler may still be writing.
        cache = work / f"xdg-cache-{next(runs)}"
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"] = str(cache)
        drop_caches()

    def py_read():
        buf = bytearray(1 << 20)
        with client.open(v.ref, "shard.bin") as f:
            while f.readinto(buf):
                pass

    rows = []
    py_cold, py_warm = [], []
    for _ in range(a.runs):
        fresh()
        client = sealvol.Client()
        py_cold.append(timed(py_read))
        py_warm.append(timed(py_read))
    mnt = work / "mnt"
    mnt.mkdir(exist_ok=True)
    dd_cold, dd_warm = [], []
    for _ in range(a.runs):
        fresh()
        subprocess.run([a.sealvol, "volume", "mount", v.ref, str(mnt)], check=True, env=env, capture_output=True)
        try:
            dd = ["dd", f"if={mnt}/shard.bin", "of=/dev/null", "bs=1M"]
            dd_cold.append(timed(lambda: subprocess.run(dd, check=True, capture_output=True)))
            drop_caches()
            dd_warm.append(timed(lambda: subprocess.run(dd, check=True, capture_output=True)))
        finally:
            subprocess.run([a.sealvol, "volume", "unmount", str(mnt)], env=env, capture_output=True)
    med = statistics.median
    mb = size / (1 << 20)
    rows.append(("open().readinto, cold", f"{mb / med(py_cold):.0f} MiB/s", f"dd through a mount: {mb / med(dd_cold):.0f} MiB/s", f"{med(dd_cold) / med(py_cold):.2f}×"))
    rows.append(("open().readinto, warm", f"{mb / med(py_warm):.0f} MiB/s", f"dd through a mount: {mb / med(dd_warm):.0f} MiB/s", f"{med(dd_warm) / med(py_warm):.2f}×"))

    fresh()
    client = sealvol.Client()
    t = client.tensors(v.ref, "model.safetensors")
    name = f"layer.{a.mib // 8}"
    before = rchar()
    got = t.get(name)
    moved = rchar() - before
    assert np.array_equal(got, tensors[name])
    rows.append(("tensors().get, one 4 MiB tensor, cold", f"{moved / (1 << 20):.1f} MiB read", "the tensor: 4.0 MiB", f"{moved / (4 << 20):.2f}× its size"))

    py_pull, cli_pull = [], []
    for i in range(a.runs):
        fresh()
        client = sealvol.Client()
        py_pull.append(timed(lambda: client.pull(v.ref, work / f"py-{i}")))
        fresh()
        cli_pull.append(timed(lambda: subprocess.run([a.sealvol, "volume", "pull", v.ref, str(work / f"cli-{i}")], check=True, env=env, capture_output=True)))
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
