#!/usr/bin/env python3
"""Read-path benchmark (issue 18): how model loaders read a mounted version, from a
local repository and from one on moto, beside the same reads of local disk and of
`rclone mount`, in one run. Prints Markdown tables for BENCHMARKS.md.

    python3 bench/read.py --sealvol BIN --data DIR/v1 [--runs 3] [--work DIR] [--origins local,s3]

Measures, each the median of --runs, every sealvol run on a fresh mount with an empty
node cache (an unmount drops the kernel's pages of a FUSE mount):
- cold `dd`: one ~512 MiB shard read in 1 MiB reads, from the mount being ready (and the
  mount's CPU seconds for it, from /proc);
- safetensors: Python's `safetensors` package, `safe_open(framework="numpy")` (it mmaps
  the file, as torch does), loading every tensor of every shard of an F16 copy of the
  checkpoint (the BF16 shards relabelled F16: numpy has no bfloat16);
- mmap walk: every BF16 shard mmapped, its header read, every tensor touched in the
  order of its offsets, one byte in each 4 KiB page;
- the same two loaders over the same files on local disk, page cache dropped first
  (the target is ≥ 0.8 × that); every other sealvol row reads a local repository's
  packs from the page cache (only the mount's memory and node cache are cold), so the
  loaders are also run with the packs dropped from it ("disk");
- warm read: the shard read again from `open` after a remount, once the node cache
  keeps it whole, beside the same read of the kept copy itself (the page cache's rate);
- peak RSS of the mount after the safetensors load of the whole version;
- a second node's start-up: the cold safetensors load without, then with, the read
  profile a first load recorded (`volume profile save`), with the shards named
  `.safetensors` and again named `.bin` (a format the mount has no plan for);
- mount ready (to the first `ls`) for versions of 100,000 and 1,000,000 small files
  (local origin; sealed cheaply by engine/core/examples/repeat_version.rs);
- on the S3 origin, `rclone mount --vfs-cache-mode off` of the same files, cold `dd`.
Needs: safetensors and numpy (pip), moto[server] and rclone for the S3 origin, fuse3.
"""
import argparse, json, os, shutil, statistics, struct, subprocess, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mount import drop_file_cache, read_rate, umount, vm_hwm, wait_ready  # noqa: E402
from s3 import Moto  # noqa: E402


def sh(*args, env=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return p.stdout


def shards(root, pattern="*.safetensors"):
    return sorted(Path(root).glob(pattern))


def as_bin(src, dst):
    """The same shards named `.bin`: a format the mount has no plan for, as torch's
    pickles, GGUF or TensorRT engines are (hard links, so no second copy on disk)."""
    dst.mkdir(parents=True, exist_ok=True)
    for p in shards(src):
        if not (dst / p.with_suffix(".bin").name).exists():
            os.link(p, dst / p.with_suffix(".bin").name)


def relabel_f16(src, dst):
    """A copy of the checkpoint whose BF16 tensors are labelled F16 (same bytes, same
    offsets; the header keeps its length, padded with spaces as the format allows)."""
    dst.mkdir(parents=True, exist_ok=True)
    for p in Path(src).iterdir():
        if p.suffix != ".safetensors":
            shutil.copyfile(p, dst / p.name)
            continue
        with open(p, "rb") as f, open(dst / p.name, "wb") as out:
            n = struct.unpack("<Q", f.read(8))[0]
            header = f.read(n).decode().replace('"BF16"', '"F16"').ljust(n).encode()
            assert len(header) == n
            out.write(struct.pack("<Q", n) + header)
            shutil.copyfileobj(f, out, 16 << 20)


# The loaders run in a child so that each one starts with no mapping of its own.
SAFETENSORS = """
import sys
from safetensors import safe_open
n = 0
for path in sys.argv[1:]:
    with safe_open(path, framework="numpy") as f:
        for k in f.keys():
            n += f.get_tensor(k).nbytes
print(n)
"""

WALK = """
import json, mmap, struct, sys
import numpy as np
n = touched = 0
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        size = struct.unpack("<Q", m[:8])[0]
        header = json.loads(m[8:8 + size])
        header.pop("__metadata__", None)
        base = 8 + size
        for t in sorted(header.values(), key=lambda t: t["data_offsets"][0]):
            s, e = t["data_offsets"]
            # One byte in each page: every page of the tensor faults in.
            touched += int(np.frombuffer(m, dtype=np.uint8, count=e - s, offset=base + s)[::4096].sum())
            n += e - s
print(n)
"""


def timed_child(code, files):
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *map(str, files)], check=True,
                         capture_output=True, text=True).stdout
    return time.perf_counter() - t, int(out)


class SealvolOrigin:
    """A sealvol repository (a local directory or a bucket) and its mounts."""

    def __init__(self, name, bin, work, env):
        self.name, self.bin, self.work, self.env = name, bin, work, env
        self.cache = work / f"cache-{name}"
        self.mnt = work / f"mnt-{name}"

    def push(self, src, vol):
        return json.loads(sh(self.bin, "volume", "push", str(src), vol, "--json", env=self.env))

    def mount(self, ref):
        umount(self.mnt)
        self.mnt.mkdir(parents=True, exist_ok=True)
        sh(self.bin, "-q", "volume", "mount", ref, str(self.mnt), "--cache", str(self.cache),
           "--cache-size", "8G", env=self.env)
        wait_ready(self.mnt)
        return self.mnt

    def pid(self):
        for m in json.loads(sh(self.bin, "volume", "mounts", "--json", env=self.env))["mounts"]:
            if m["dir"] == str(self.mnt):
                return m["pid"]

    def unmount(self):
        subprocess.run([self.bin, "-q", "volume", "unmount", str(self.mnt)], env=self.env)

    def cold(self, ref):
        shutil.rmtree(self.cache, ignore_errors=True)
        return self.mount(ref)

    def drop_repo_pages(self):
        """A local repository's packs out of the page cache too: the mount then reads
        them from disk, as the local-disk rows do."""
        for p in (self.work / "repo").rglob("*"):
            if p.is_file():
                drop_file_cache(p)


def cpu_seconds(pid):
    """User and system CPU seconds a process has used so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def median_of(runs, fn):
    xs = [fn() for _ in range(runs)]
    return statistics.median(xs), xs


ALL = ("dd", "safetensors", "walk", "disk", "warm", "rss", "ready", "profile", "rclone")


def measure_origin(o, runs, shard_name, v1, f16, measures=ALL):
    r = {}

    def dd():
        mnt = o.cold("bench/ckpt")
        pid = o.pid()
        before = cpu_seconds(pid)
        rate, _ = read_rate(mnt / shard_name)
        r.setdefault("dd_cpu", []).append(cpu_seconds(pid) - before)
        o.unmount()
        return rate

    if "dd" in measures:
        r["dd"] = median_of(runs, dd)
        r["dd_cpu"] = (statistics.median(r["dd_cpu"]), r["dd_cpu"])

    def loader(code, vol):
        def run():
            mnt = o.cold(vol)
            secs, _ = timed_child(code, shards(mnt))
            o.unmount()
            return secs
        return run

    if "safetensors" in measures:
        r["safetensors"] = median_of(runs, loader(SAFETENSORS, "bench/f16"))
    if "walk" in measures:
        r["walk"] = median_of(runs, loader(WALK, "bench/ckpt"))
    if o.name == "local" and "disk" in measures:
        def from_disk(code, vol):
            def run():
                o.drop_repo_pages()
                return loader(code, vol)()
            return run
        r["safetensors_disk"] = median_of(runs, from_disk(SAFETENSORS, "bench/f16"))
        r["walk_disk"] = median_of(runs, from_disk(WALK, "bench/ckpt"))

    def warm():
        mnt = o.cold("bench/ckpt")
        read_rate(mnt / shard_name)
        o.unmount()  # waits for the shard to be kept whole
        mnt = o.mount("bench/ckpt")
        rate, _ = read_rate(mnt / shard_name)
        o.unmount()
        # The ceiling: the same read of the kept copy itself, from the page cache.
        kept = max((p for p in (o.cache / "files").rglob("*") if p.is_file()),
                   key=lambda p: p.stat().st_size)
        r.setdefault("warm_ceiling", []).append(read_rate(kept)[0])
        return rate

    if "warm" in measures:
        r["warm"] = median_of(runs, warm)
        r["warm_ceiling"] = (statistics.median(r["warm_ceiling"]), r["warm_ceiling"])
    if "rss" in measures:
        mnt = o.cold("bench/f16")
        timed_child(SAFETENSORS, shards(mnt))
        r["rss"] = vm_hwm(o.pid())
        o.unmount()
    if "profile" in measures:
        # A second node's start-up: the same cold load, without and then with the read
        # profile the first node's load recorded (saved between the two); once with the
        # shards named .safetensors (which have plans of their own), once named .bin.
        for key, vol, pattern in (("profile", "bench/f16", "*.safetensors"),
                                  ("profile_bin", "bench/f16bin", "*.bin")):
            def without(vol=vol, pattern=pattern):
                mnt = o.cold(vol)
                secs, _ = timed_child(SAFETENSORS, shards(mnt, pattern))
                o.unmount()
                return secs
            r[f"{key}_without"] = median_of(runs, without)
            without()
            sh(o.bin, "volume", "profile", "save", vol, env=o.env)
            r[f"{key}_with"] = median_of(runs, without)
    return r


def local_walks(runs, v1, f16):
    def cold(code, root):
        def run():
            for p in shards(root):
                drop_file_cache(p)
            return timed_child(code, shards(root))[0]
        return run
    return {"safetensors": median_of(runs, cold(SAFETENSORS, f16)),
            "walk": median_of(runs, cold(WALK, v1))}


def many_files_ready(o, work, runs, example):
    """Mount-ready times for 100,000 and 1,000,000 small files: a folder of 1,000 small
    files pushed once, then sealed 100 and 1,000 times over."""
    small = work / "small"
    if not small.exists():
        for d in range(100):
            (small / f"d{d:02}").mkdir(parents=True)
            for i in range(10):
                (small / f"d{d:02}" / f"f{i}.json").write_text(json.dumps({"d": d, "i": i}))
    src = o.push(small, "bench/small")["ref"]
    out = {}
    for copies, label in ((100, "100,000"), (1000, "1,000,000")):
        ref = sh(str(example), str(o.env["SEALVOL_REPO"]), src, str(copies), f"bench/many{copies}",
                 env=o.env).strip()

        def ready(ref=ref):
            t = time.perf_counter()
            o.mount(ref)
            os.listdir(o.mnt)
            secs = time.perf_counter() - t
            o.unmount()
            return secs
        out[label] = median_of(runs, ready)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--data", required=True, type=Path, help="the v1 folder of gen_checkpoints.py")
    ap.add_argument("--work", default="/var/tmp/sealvol-bench/read", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--origins", default="local,s3")
    ap.add_argument("--measures", default=",".join(ALL), help="a subset of " + ",".join(ALL))
    a = ap.parse_args()
    measures = set(a.measures.split(","))
    bin = str(Path(a.sealvol).resolve())
    example = Path(bin).parent / "examples" / "repeat_version"
    for d in ("repo", "state-local", "state-s3", "cache-local", "cache-s3", "rc-cache", "moto"):
        shutil.rmtree(a.work / d, ignore_errors=True)
    a.work.mkdir(parents=True, exist_ok=True)
    v1, f16 = a.data, a.work / "f16"
    if not f16.exists():
        relabel_f16(v1, f16)
    f16bin = a.work / "f16bin"
    as_bin(f16, f16bin)
    shard = max(shards(v1), key=lambda p: p.stat().st_size)
    origins, results = a.origins.split(","), {}
    moto = None
    try:
        if "local" in origins:
            o = SealvolOrigin("local", bin, a.work, dict(os.environ, SEALVOL_REPO=str(a.work / "repo"),
                                                        SEALVOL_STATE=str(a.work / "state-local")))
            o.push(v1, "bench/ckpt")
            o.push(f16, "bench/f16")
            o.push(f16bin, "bench/f16bin")
            os.sync()  # the pushes' writeback is not to slow the first measures
            results["sealvol, local repository"] = measure_origin(o, a.runs, shard.name, v1, f16, measures)
            many = many_files_ready(o, a.work, a.runs, example) if example.exists() and "ready" in measures else {}
        if "s3" in origins:
            (a.work / "moto").mkdir()
            moto = Moto(a.work / "moto")
            ep = f"http://127.0.0.1:{moto.port}"
            env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
            env.update(AWS_ENDPOINT_URL=ep, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                       AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                       SEALVOL_REPO="s3://sealvol-read/repo", SEALVOL_STATE=str(a.work / "state-s3"),
                       RCLONE_CONFIG_MOTO_TYPE="s3", RCLONE_CONFIG_MOTO_PROVIDER="Other",
                       RCLONE_CONFIG_MOTO_ENDPOINT=ep, RCLONE_CONFIG_MOTO_ACCESS_KEY_ID="bench",
                       RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY="bench", RCLONE_CONFIG_MOTO_FORCE_PATH_STYLE="true")
            sh("rclone", "mkdir", "moto:sealvol-read", env=env)
            sh(bin, "init", env=env)
            o = SealvolOrigin("s3", bin, a.work, env)
            o.push(v1, "bench/ckpt")
            o.push(f16, "bench/f16")
            o.push(f16bin, "bench/f16bin")
            os.sync()
            results["sealvol, repository on moto"] = measure_origin(o, a.runs, shard.name, v1, f16, measures)
        if "s3" in origins and "rclone" in measures:
            sh("rclone", "copy", "--transfers", "4", str(v1), "moto:sealvol-read/rclone", env=env)
            mnt = a.work / "mnt-rclone"

            def rclone_dd():
                umount(mnt)
                mnt.mkdir(exist_ok=True)
                p = subprocess.Popen(["rclone", "mount", "moto:sealvol-read/rclone", str(mnt), "--read-only",
                                      "--vfs-cache-mode", "off", "--cache-dir", str(a.work / "rc-cache")],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_ready(mnt)
                    return read_rate(mnt / shard.name)[0]
                finally:
                    umount(mnt)
                    p.wait()
            results["rclone mount --vfs-cache-mode off, moto"] = {"dd": median_of(a.runs, rclone_dd)}
        local = local_walks(a.runs, v1, f16) if measures & {"safetensors", "walk"} else {}
    finally:
        if moto:
            moto.proc.kill()

    gb = lambda m: "-" if m is None else f"{m[0] / 1e9:.2f} GB/s"
    s = lambda m: "-" if m is None else f"{m[0]:.2f} s"
    rel = lambda m, base: "-" if m is None or base is None else f"{base[0] / m[0]:.2f} ×"
    print(f"\nShard: {shard.name} ({shard.stat().st_size >> 20} MiB); version "
          f"{sum(p.stat().st_size for p in v1.iterdir()) / 2**30:.2f} GiB; median of {a.runs}\n")
    print("| reader | cold dd | safetensors load | vs local disk | mmap walk | vs local disk | warm read | peak RSS |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| local disk, page cache dropped | - | {s(local.get('safetensors'))} | 1 × | {s(local.get('walk'))} | 1 × | - | - |")
    for name, r in list(results.items()):
        if "safetensors_disk" in r:
            results[f"{name}, its packs not in the page cache either"] = {
                "safetensors": r["safetensors_disk"], "walk": r["walk_disk"]}
    for name, r in results.items():
        print(f"| {name} | {gb(r.get('dd'))} | {s(r.get('safetensors'))} | {rel(r.get('safetensors'), local.get('safetensors'))} "
              f"| {s(r.get('walk'))} | {rel(r.get('walk'), local.get('walk'))} | {gb(r.get('warm'))} "
              f"| {r['rss'] >> 20 if 'rss' in r else '-'} MiB |")
    if any("profile_with" in r for r in results.values()):
        print("\n| second node start-up (cold safetensors load) | without a read profile | with one |\n| --- | ---: | ---: |")
        for name, r in results.items():
            for key, label in (("profile", "shards named .safetensors"), ("profile_bin", "shards named .bin")):
                if f"{key}_with" in r:
                    print(f"| {name}, {label} | {s(r[f'{key}_without'])} | {s(r[f'{key}_with'])} |")
    if any("dd_cpu" in r for r in results.values()):
        print("\n| cold dd | the mount's CPU seconds for the shard |\n| --- | ---: |")
        for name, r in results.items():
            if "dd_cpu" in r:
                print(f"| {name} | {r['dd_cpu'][0]:.2f} |")
    if any("warm_ceiling" in r for r in results.values()):
        print("\n| warm read from `open` | through the mount | the kept copy read directly |\n| --- | ---: | ---: |")
        for name, r in results.items():
            if "warm_ceiling" in r:
                print(f"| {name} | {gb(r['warm'])} | {gb(r['warm_ceiling'])} |")
    if "local" in origins and many:
        print("\n| mount ready (to the first `ls`), local repository | seconds |\n| --- | ---: |")
        for label, m in many.items():
            print(f"| {label} files | {m[0]:.3f} |")
    print("\nAll runs:", json.dumps({**results, "local disk": local, **({"many": many} if "local" in origins else {})}),
          file=sys.stderr)


if __name__ == "__main__":
    main()
