#!/usr/bin/env python3
"""Listing benchmark: `volume versions` and `volume ls` (what the console's volumes and
versions screens call) on a repository of 100 versions of 100,000 files each, local
and on moto, with the version summaries and without them (the manifests read whole,
as every listing did before summaries). A second volume of 100 versions of 1,000 files
shows that the time follows the number of versions, not their files. Prints a
Markdown table for BENCHMARKS.md.

    python3 bench/listing.py --sealvol BIN [--versions 100] [--copies 100] [--runs 10] [--work DIR]

The versions are sealed cheaply (engine/core/examples/repeat_version.rs): COPIES copies
of a 1,000-file version, each variant another version. The local repository is then
copied into a bucket of moto_server with rclone: the layout is the same.
Needs: moto[server], rclone, hyperfine.
"""
import argparse, json, os, shutil, socket, subprocess, sys, time
from pathlib import Path


def sh(*args, env=None):
    return subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def hyperfine(cmd, env, runs):
    out = Path("/tmp/sealvol-listing-hf.json")
    subprocess.run(["hyperfine", "--warmup", "1", "--runs", str(runs), "--export-json", str(out),
                    "--style", "none", cmd], check=True, env=env, capture_output=True)
    r = json.loads(out.read_text())["results"][0]
    return r["median"], r["stddev"] or 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--versions", type=int, default=100)
    ap.add_argument("--copies", type=int, default=100)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--work", default="/var/tmp/sealvol-bench/listing")
    a = ap.parse_args()
    bin = Path(a.sealvol).resolve()
    example = bin.parent / "examples" / "repeat_version"
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    repo = work / "repo"
    env = dict(os.environ, SEALVOL_REPO=str(repo), SEALVOL_STATE=str(work / "state"),
               SEALVOL_FSYNC="0")

    src = work / "src"
    for i in range(1000):
        p = src / f"d{i % 10}" / f"f{i:04}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(i.to_bytes(4, "little") * 64)
    base = sh(str(bin), "volume", "push", str(src), "src/base", env=env).strip().splitlines()[-1]
    t = time.time()
    for k in range(a.versions):
        sh(str(example), str(repo), base, str(a.copies), "big/model", str(k))
        sh(str(example), str(repo), base, "1", "small/model", str(k))
    sealed = time.time() - t
    manifest = max((repo / "manifests/big/model").iterdir(), key=lambda p: p.stat().st_size)
    files = json.loads(manifest.read_text())["stats"]["files"]
    print(f"sealed {2 * a.versions} versions in {sealed:.0f} s; a big one holds {files} files "
          f"in a {manifest.stat().st_size / 1e6:.1f} MB manifest", file=sys.stderr)

    port = free_port()
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        # rclone refuses a custom CA bundle on plain HTTP; loopback needs none.
        env.pop("AWS_CA_BUNDLE", None)
        s3env = dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="bench",
                     AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
                     AWS_EC2_METADATA_DISABLED="true", SEALVOL_REPO="s3://bench/repo",
                     RCLONE_CONFIG_MOTO_TYPE="s3", RCLONE_CONFIG_MOTO_PROVIDER="Other",
                     RCLONE_CONFIG_MOTO_ENDPOINT=f"http://127.0.0.1:{port}",
                     RCLONE_CONFIG_MOTO_ACCESS_KEY_ID="bench",
                     RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY="bench",
                     RCLONE_CONFIG_MOTO_FORCE_PATH_STYLE="true")
        sh("rclone", "mkdir", "moto:bench", env=s3env)
        t = time.time()
        sh("rclone", "copy", "--transfers", "16", str(repo), "moto:bench/repo", env=s3env)
        print(f"copied the repository into moto in {time.time() - t:.0f} s", file=sys.stderr)

        rows = []
        for where, e in (("local", env), ("moto", s3env)):
            for summaries in (True, False):
                if not summaries:
                    if where == "local":
                        shutil.move(repo / "summaries", work / "summaries.aside")
                    else:
                        sh("rclone", "purge", "moto:bench/repo/summaries", env=s3env)
                for what, cmd in (
                    (f"volume versions big/model ({a.versions} × {files} files)", "volume versions big/model"),
                    (f"volume versions small/model ({a.versions} × 1,000 files)", "volume versions small/model"),
                    ("volume ls (the volumes screen)", "volume ls"),
                ):
                    med, sd = hyperfine(f"{bin} {cmd}", e, a.runs)
                    rows.append((where, "summaries" if summaries else "manifests read whole", what, med, sd))
                    print(rows[-1], file=sys.stderr)
            if where == "local":
                shutil.move(work / "summaries.aside", repo / "summaries")
    finally:
        moto.kill()

    print(f"| repository | listing from | command | median | ± |")
    print("| --- | --- | --- | ---: | ---: |")
    for where, how, what, med, sd in rows:
        print(f"| {where} | {how} | `{what}` | {med * 1000:.0f} ms | {sd * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
