#!/usr/bin/env python3
"""Many tiny files: a push of 50,000 files of a few bytes each (an evaluation set, a
tokenizer folder, embedding shards' metadata), side by side for each build given.
Prints a Markdown table for BENCHMARKS.md.

    python3 bench/small_files.py --sealvol BIN [--sealvol BIN2 ...] [--files 50000] [--runs 3] [--work DIR] [--bucket]

For each build, `--runs` times, taking turns: a fresh local repository (durable, the
default), the folder in the page cache, then `volume push`. Reported per build, the
median run: wall time, peak RSS, and what the push added to the repository: bytes
(the sum of object sizes), blocks on disk (`du`), and objects. Also, once:
`sealvol digest` of the folder (reading and hashing every file, no repository).
With `--bucket`, the same into a fresh prefix of a moto_server bucket (needs
moto[server] and boto3): wall time, objects written and requests (moto's log).
"""
import argparse, os, shutil, subprocess, sys, time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def make_folder(root, n):
    """n files in folders of 1,000, each its row number as text (326 KiB for 50,000)."""
    if (root / ".done").exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    for i in range(n):
        d = root / f"part-{i // 1000:03d}"
        if i % 1000 == 0:
            d.mkdir(parents=True)
        (d / f"row-{i:05d}.txt").write_text(f"{i}\n")
    (root / ".done").touch()


def objects(repo):
    count = size = blocks = 0
    for p in Path(repo).rglob("*"):
        if p.is_file() and not p.relative_to(repo).parts[0] == "tmp":
            st = p.stat()
            count += 1
            size += st.st_size
            blocks += st.st_blocks * 512
    return count, size, blocks


def run(binary, data, work):
    repo, state = work / "repo", work / "state"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    env = dict(os.environ, SEALVOL_REPO=str(repo), SEALVOL_STATE=str(state))
    subprocess.run([binary, "-q", "init"], env=env, check=True, stdout=subprocess.DEVNULL)
    before = objects(repo)
    subprocess.run(["sync"], check=True)
    subprocess.run(f"find {data} -type f -exec cat {{}} + > /dev/null", shell=True, check=True)
    t = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "-q", "volume", "push", str(data),
                        "bench/tiny"], env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t
    rss = int(p.stderr.strip().splitlines()[-1]) / 1024
    after = objects(repo)
    return wall, rss, [a - b for a, b in zip(after, before)]


def run_bucket(binary, data, work, moto, prefix):
    import boto3
    ep = f"http://127.0.0.1:{moto.port}"
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    env.update(AWS_ENDPOINT_URL=ep, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
               AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
               SEALVOL_REPO=f"s3://small-bench/{prefix}", SEALVOL_STATE=str(work / f"state-{prefix}"))
    s3 = boto3.client("s3", endpoint_url=ep, aws_access_key_id="bench",
                      aws_secret_access_key="bench", region_name="us-east-1")
    try:
        s3.create_bucket(Bucket="small-bench")
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    subprocess.run([binary, "-q", "init"], env=env, check=True, stdout=subprocess.DEVNULL)

    def count():
        n = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="small-bench", Prefix=prefix + "/"):
            n += len(page.get("Contents", []))
        return n
    before, r0 = count(), moto.requests()
    t = time.monotonic()
    subprocess.run([binary, "-q", "volume", "push", str(data), "bench/tiny"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t
    return wall, moto.requests() - r0, count() - before


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", action="append", required=True)
    ap.add_argument("--files", type=int, default=50000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/var/tmp/sealvol-bench/small")
    ap.add_argument("--bucket", action="store_true")
    a = ap.parse_args()
    work = Path(a.work)
    data = work / f"tiny-{a.files}"
    make_folder(data, a.files)
    total = sum(p.stat().st_size for p in data.rglob("*.txt"))
    results = {b: [] for b in a.sealvol}
    for _ in range(a.runs):
        for b in a.sealvol:
            results[b].append(run(os.path.abspath(b), data, work))
            print(f"{b}: {results[b][-1]}", file=sys.stderr)
    t = time.monotonic()
    subprocess.run([os.path.abspath(a.sealvol[0]), "-q", "digest", str(data)], check=True,
                   stdout=subprocess.DEVNULL)
    digest = time.monotonic() - t
    print(f"\n{a.files:,} files, {total / 1024:,.0f} KiB in all; `sealvol digest` of the folder "
          f"{digest:.2f} s; median of {a.runs} runs each, taking turns\n")
    print("| build | push | peak RSS | bytes added | blocks on disk | objects written |")
    print("| --- | --- | --- | --- | --- | --- |")
    for b, rs in results.items():
        mid = sorted(rs, key=lambda r: r[0])[len(rs) // 2]
        wall, rss, (count, size, blocks) = mid
        print(f"| {b} | {wall:.2f} s | {rss:.0f} MiB | {size / 1e6:.1f} MB | "
              f"{blocks / 1e6:.1f} MB | {count:,} |")
    if not a.bucket:
        return
    from s3 import Moto
    moto = Moto(work)
    try:
        print("\nOn a moto_server bucket (loopback), one run each:\n")
        print("| build | push | objects written | requests |")
        print("| --- | --- | --- | --- |")
        for n, b in enumerate(a.sealvol):
            wall, requests, objects = run_bucket(os.path.abspath(b), data, work, moto, f"p{n}")
            print(f"| {b} | {wall:.2f} s | {objects:,} | {requests:,} |")
    finally:
        moto.proc.kill()


if __name__ == "__main__":
    main()
