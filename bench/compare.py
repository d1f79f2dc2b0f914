#!/usr/bin/env python3
"""Runs the ingest comparison for bench/run.sh. See that file for usage."""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ENV = dict(os.environ, RESTIC_PASSWORD="bench", BORG_PASSPHRASE="",
           BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK="yes", BORG_RELOCATED_REPO_ACCESS_IS_OK="yes")


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, env=kw.pop("env", ENV),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


def warm(data):
    for v in ("v1", "v2", "v3"):
        sh(f"cat {data}/{v}/* > /dev/null")


def tools(sealvol, repo, baseline=None):
    """name -> (init command, ingest command template with {v} and {dir})"""
    sv = f"SEALVOL_REPO={repo} SEALVOL_STATE={repo}.state {sealvol} -q volume push {{dir}} bench/ck"
    rows = {
        "sealvol": (f"rm -rf {repo} {repo}.state", sv),
        "sealvol (fsync off)": (f"rm -rf {repo} {repo}.state", "SEALVOL_FSYNC=0 " + sv),
    }
    if baseline:
        old = f"SEALVOL_REPO={repo} SEALVOL_STATE={repo}.state {baseline} -q volume push {{dir}} bench/ck"
        rows["sealvol baseline"] = (f"rm -rf {repo} {repo}.state", old)
        rows["sealvol baseline (fsync off)"] = (f"rm -rf {repo} {repo}.state", "SEALVOL_FSYNC=0 " + old)
    return rows | {
        "borg": (f"rm -rf {repo} && borg init -e none {repo}", f"borg create {repo}::{{v}} {{dir}}"),
        "restic": (f"rm -rf {repo} ~/.cache/restic && restic init -q --repo {repo}",
                   f"restic backup -q --repo {repo} {{dir}}"),
        "casync": (f"rm -rf {repo} && mkdir -p {repo}",
                   f"casync make --store={repo}/store {repo}/{{v}}.caidx {{dir}}"),
    }


def cold_ingest(name, init, ingest, data, runs, work):
    out = os.path.join(work, f"hf-{name.split()[0]}-{len(name)}.json")
    cmd = ingest.format(v="v1", dir=f"{data}/v1")
    subprocess.run(["hyperfine", "--runs", str(runs), "--style", "none", "--prepare",
                    f"{init} && sync && cat {data}/v1/* > /dev/null", "--export-json", out, cmd],
                   check=True, env=ENV, stdout=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)["results"][0]
    return statistics.median(r["times"])


def growth(init, ingest, data, repo):
    sh(init)
    sizes, rss = [], None
    for v in ("v1", "v2", "v3"):
        sh(f"sync && cat {data}/{v}/* > /dev/null")
        p = sh(f"/usr/bin/time -f '%M' sh -c '{ingest.format(v=v, dir=f'{data}/{v}')}'")
        kib = int(p.stderr.decode().strip().splitlines()[-1])
        rss = kib if rss is None else max(rss, kib)
        sizes.append(du(repo))
    return [sizes[0], sizes[1] - sizes[0], sizes[2] - sizes[1]], rss


def sealvol_metadata(repo):
    """Bytes of everything that is not chunk data: indexes, chunk lists, manifests,
    tags, config, pack headers and trailers."""
    data = 0
    for d in ("index",):
        for root, _, files in os.walk(os.path.join(repo, d)):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    raw = fh.read()
                count = int.from_bytes(raw[8:16], "little")
                for i in range(count):
                    e = raw[16 + i * 52: 16 + (i + 1) * 52]
                    data += int.from_bytes(e[40:44], "little")
    return du(repo) - data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--baseline", help="another sealvol build to measure beside --sealvol")
    ap.add_argument("--shared", required=True)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/var/tmp/sealvol-bench")
    ap.add_argument("--only", help="comma-separated tool names")
    a = ap.parse_args()
    sealvol = os.path.abspath(a.sealvol)
    data = os.path.join(a.work, f"ck-{a.gib}")
    if not os.path.exists(os.path.join(data, "expected.json")):
        print(f"generating {a.gib} GiB checkpoints in {data} ...", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(a.shared, "bench", "gen_checkpoints.py"), data,
                        "--gib", str(a.gib)], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(data, "expected.json")) as f:
        expected = json.load(f)
    repo = os.path.join(a.work, "repo")
    rows = []
    baseline = os.path.abspath(a.baseline) if a.baseline else None
    for name, (init, ingest) in tools(sealvol, repo, baseline).items():
        if a.only and name.split()[0] not in a.only.split(","):
            continue
        print(f"{name}: cold ingest x{a.runs} ...", file=sys.stderr)
        t = cold_ingest(name, init, ingest, data, a.runs, a.work)
        print(f"{name}: v1 -> v2 -> v3 ...", file=sys.stderr)
        g, rss = growth(init, ingest, data, repo)
        meta = sealvol_metadata(repo) if name.startswith("sealvol") else None
        rows.append((name, t, g, rss, meta))
        sh(f"rm -rf {repo} {repo}.state")
    base = next((r[1] for r in rows if r[0] == "borg"), None)
    changed = expected["changed_tensor_bytes"]
    mb = lambda b: f"{b / 1e6:,.1f} MB"
    mem_gib = round(int(open("/proc/meminfo").readline().split()[1]) / 2**20)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"\n### {time.strftime('%Y-%m-%d')}: {cpu}, {os.cpu_count()} cores, {mem_gib} GiB, "
          f"{a.gib} GiB per version, median of {a.runs} cold runs (input in page cache)\n")
    print(f"v1 = {mb(expected['bytes']['v1'])}; v2 changed tensors = {mb(changed['v2'])}; "
          f"v3 inserted tensor = {mb(changed['v3'])}\n")
    print("| tool | cold ingest v1 | vs borg | peak RSS | stored v1 | stored +v2 | +v2 / changed | stored +v3 | metadata / version |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, t, g, rss, meta in rows:
        ratio = f"{base / t:.2f}x" if base else "-"
        m = f"{meta / 3 / expected['bytes']['v1'] * 100:.3f}%" if meta is not None else "-"
        print(f"| {name} | {t:.2f} s | {ratio} | {rss / 1024:.0f} MiB | {mb(g[0])} | {mb(g[1])} | "
              f"{g[1] / changed['v2']:.3f} | {mb(g[2])} | {m} |")


if __name__ == "__main__":
    main()
