#!/usr/bin/env python3
"""Versions as OCI artifacts (issue 64), side by side in one run. Prints a Markdown
table for BENCHMARKS.md.

    python3 bench/oci.py --sealvol BIN --checkpoints DIR [--runs 3]

`DIR` from `../shared/bench/gen_checkpoints.py` (v1, v2). A local repository holding
v1 and v2; Debian's docker-registry on loopback (a fresh one for each run), skopeo.
Each measure is the median of --runs, the page cache dropped first:
- `volume export v1 docker://…` into an empty registry against `skopeo copy` of the
  same artifact from an OCI image layout on disk (the files already exported) into an
  empty registry: target >= 1x (sealvol no slower);
- `volume export v2` after v1: the bytes sent against the bytes of the files that
  changed (OCI deduplicates whole files; a file with one changed tensor is sent whole);
- `skopeo copy` of v1 from `serve`'s /v2/ against from the registry, into a layout.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from python import drop_caches  # noqa: E402


def registry(work: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = work / f"registry-{port}"
    config = work / f"registry-{port}.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {data}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    p = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    host = f"127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://{host}/v2/", timeout=2)
            return p, host, data
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.1)
    raise SystemExit("docker-registry did not come up")


def timed(cmd, env=None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--checkpoints", required=True)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    src = Path(a.checkpoints)
    work = Path(tempfile.mkdtemp(prefix="sealvol-bench-oci-", dir="/var/tmp"))
    env = dict(os.environ, SEALVOL_REPO=str(work / "repo"), SEALVOL_STATE=str(work / "state"),
               XDG_CACHE_HOME=str(work / "xdg-cache"), XDG_CONFIG_HOME=str(work / "xdg-config"))
    sv = a.sealvol
    for v in ("v1", "v2"):
        subprocess.run([sv, "volume", "push", str(src / v), "w/ck", "--tag", v], env=env, check=True,
                       capture_output=True)
    layout = work / "layout"
    subprocess.run([sv, "volume", "export", "w/ck:v1", f"oci:{layout}:v1"], env=env, check=True,
                   capture_output=True)
    size = sum(p.stat().st_size for p in (src / "v1").rglob("*") if p.is_file())
    changed = sum((src / "v2" / p.relative_to(src / "v1")).stat().st_size
                  for p in (src / "v1").rglob("*")
                  if p.is_file() and p.read_bytes() != (src / "v2" / p.relative_to(src / "v1")).read_bytes())
    export_s, skopeo_s, sent2, from_serve, from_reg = [], [], [], [], []
    serve = subprocess.Popen([sv, "serve", "--listen", "127.0.0.1:0"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    url = serve.stdout.readline().strip().split("listening on ")[1]
    key = (work / "state" / "serve" / "admin.key").read_text().strip()
    shost = url.split("://")[1]
    try:
        for run in range(a.runs):
            reg, host, data = registry(work)
            drop_caches()
            export_s.append(timed([sv, "volume", "export", "w/ck:v1", f"docker://{host}/m/ck:v1",
                                   "--tls-verify=false"], env))
            out = subprocess.run([sv, "volume", "export", "w/ck:v2", f"docker://{host}/m/ck:v2",
                                  "--tls-verify=false", "--json"], env=env, check=True, capture_output=True,
                                 text=True)
            sent2.append(json.loads(out.stdout)["bytes_written"])
            drop_caches()
            d = work / "from-reg"
            from_reg.append(timed(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                                   f"docker://{host}/m/ck:v1", f"oci:{d}:x"]))
            shutil.rmtree(d)
            drop_caches()
            d = work / "from-serve"
            from_serve.append(timed(["skopeo", "copy", "--quiet", "--src-tls-verify=false", "--src-creds",
                                     f"u:{key}", f"docker://{shost}/w/ck:v1", f"oci:{d}:x"]))
            shutil.rmtree(d)
            reg.kill()
            reg.wait()
            shutil.rmtree(data)
            reg, host, data = registry(work)
            drop_caches()
            skopeo_s.append(timed(["skopeo", "copy", "--quiet", "--dest-tls-verify=false", f"oci:{layout}:v1",
                                   f"docker://{host}/m/ck:v1"]))
            reg.kill()
            reg.wait()
            shutil.rmtree(data)
            print(f"run {run + 1}: export {export_s[-1]:.2f} s, skopeo from a layout {skopeo_s[-1]:.2f} s, "
                  f"v2 sent {sent2[-1]} B; pull from serve {from_serve[-1]:.2f} s, from the registry "
                  f"{from_reg[-1]:.2f} s", file=sys.stderr)
    finally:
        serve.kill()
        shutil.rmtree(work, ignore_errors=True)
    m = statistics.median
    gib = size / (1 << 30)
    print(f"| what ({gib:.2f} GiB, median of {a.runs}) | sealvol | peer | ratio | target |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| v1 into an empty registry: `volume export` vs `skopeo copy` from a layout on disk | {m(export_s):.2f} s | "
          f"{m(skopeo_s):.2f} s | {m(skopeo_s) / m(export_s):.2f}x as fast | >= 1x |")
    print(f"| v2 after v1: bytes sent vs the bytes of the files that changed | {m(sent2)} | {changed} | "
          f"{m(sent2) / max(changed, 1):.3f}x | ~1x |")
    print(f"| `skopeo copy` of v1 into a layout: from `serve` vs from the registry | {m(from_serve):.2f} s | "
          f"{m(from_reg):.2f} s | {m(from_reg) / m(from_serve):.2f}x as fast | |")


if __name__ == "__main__":
    main()
