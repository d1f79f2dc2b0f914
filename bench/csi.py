#!/usr/bin/env python3
"""Publish latency of the CSI node plugin (issue 37): from kubelet's NodePublishVolume
call to the first byte of a file readable at the target path, through the real
`sealvol csi` and a client generated from the CSI spec's protobuf (tests/csi/kubelet.py).

    python3 bench/csi.py --sealvol BIN --data DIR [--runs 5] [--files 100000] [--work DIR]

Versions, pushed into a local repository first: a 1 KiB one (the floor), DIR (the
2 GiB v1 of ../shared/bench/gen_checkpoints.py), and one of --files small files. For
each, --runs publishes of one inline volume with an empty node cache each time
(median and max), then 8 pods publishing the same version at once (each one's call to
first byte; median and max of the 8, over the runs). The repository's packs are in
the page cache: what is measured is the plugin and the mount, not a disk. Prints a
Markdown table and one JSON line.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KUBELET = ROOT / "tests" / "csi" / "kubelet.py"
PODS = 8


def sh(env, *args):
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return p.stdout.strip()


class Plugin:
    def __init__(self, bin, env, work):
        self.socket = work / "csi.sock"
        self.log = open(work / "csi.log", "ab")
        self.p = subprocess.Popen([bin, "csi", "--endpoint", f"unix://{self.socket}", "--node-id", "bench"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60
        while not self.socket.exists():
            if time.monotonic() > deadline or self.p.poll() is not None:
                sys.exit(f"the plugin did not listen: see {work / 'csi.log'}")
            time.sleep(0.02)
        self.k = subprocess.Popen([sys.executable, str(KUBELET), str(self.socket)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, msg):
        self.k.stdin.write(json.dumps(msg) + "\n")
        self.k.stdin.flush()
        return json.loads(self.k.stdout.readline())

    def close(self):
        self.k.kill()
        self.p.terminate()
        self.p.wait()


def publish(work, pod, ref, first):
    target = work / "kubelet" / "pods" / pod / "volumes" / "kubernetes.io~csi" / "v"
    target.mkdir(parents=True, exist_ok=True)
    target = target / "mount"
    req = {
        "volume_id": f"csi-{pod}",
        "target_path": str(target),
        "volume_capability": {"mount": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}},
        "readonly": True,
        "volume_context": {"ref": ref, "csi.storage.k8s.io/ephemeral": "true"},
    }
    return {"call": "NodePublishVolume", "request": req, "then_read": str(target / first)}, target


def unpublish(plugin, pod, target):
    a = plugin.send({"call": "NodeUnpublishVolume", "request": {"volume_id": f"csi-{pod}", "target_path": str(target)}})
    if "ok" not in a:
        sys.exit(f"unpublish failed: {a}")


def first_file(folder):
    """The file whose first byte is read: the largest (its chunk list is the longest to
    load), the first by name among equals."""
    files = [p for p in Path(folder).rglob("*") if p.is_file()]
    return str(min(files, key=lambda p: (-p.stat().st_size, str(p))).relative_to(folder))


def measure(plugin, work, cache, ref, first, runs):
    """Seconds from the call to the first byte, one pod and 8 at once; and from the
    call to its answer (the mount ready), one pod."""
    one, gang, ready = [], [], []
    for r in range(runs):
        shutil.rmtree(cache, ignore_errors=True)
        call, target = publish(work, f"one-{r}", ref, first)
        a = plugin.send(call)
        if "ok" not in a:
            sys.exit(f"publish failed: {a}")
        one.append(a["read_s"])
        ready.append(a["call_s"])
        unpublish(plugin, f"one-{r}", target)
    for r in range(runs):
        shutil.rmtree(cache, ignore_errors=True)
        calls = [publish(work, f"gang-{r}-{i}", ref, first) for i in range(PODS)]
        out = plugin.send({"parallel": [c for c, _ in calls]})
        for a in out["results"]:
            if "ok" not in a:
                sys.exit(f"publish failed: {a}")
            gang.append(a["read_s"])
        for i, (_, target) in enumerate(calls):
            unpublish(plugin, f"gang-{r}-{i}", target)
    return one, gang, ready


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--data", required=True, help="the 2 GiB version's folder (ck-2.0/v1)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--work", default="/var/tmp/sealvol-bench-csi")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cache = work / "cache"
    env = dict(os.environ, SEALVOL_REPO=str(work / "repo"), SEALVOL_STATE=str(work / "state"),
               SEALVOL_CACHE=str(cache), SEALVOL_FSYNC="0", XDG_CONFIG_HOME=str(work / "config"))
    env.pop("SEALVOL_REMOTE", None)

    tiny = work / "tiny"
    tiny.mkdir()
    (tiny / "config.json").write_bytes(b"{}" * 512)
    small = work / "small"
    for i in range(a.files):
        d = small / f"{i // 1000:03d}"
        if i % 1000 == 0:
            d.mkdir(parents=True)
        (d / f"{i:06d}.txt").write_bytes(f"row {i}\n".encode())
    versions = []
    data = Path(a.data)
    size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    count = sum(1 for p in data.rglob("*") if p.is_file())
    for name, folder in [("1 KiB, 1 file", tiny), (f"{size / 2**30:.2f} GiB, {count} files ({data.name})", data),
                         (f"{a.files:,} files", small)]:
        ref = sh(env, a.sealvol, "-q", "volume", "push", str(folder), "bench/v")
        versions.append((name, ref, first_file(folder)))

    plugin = Plugin(a.sealvol, env, work)
    rows = []
    try:
        for name, ref, first in versions:
            one, gang, ready = measure(plugin, work, cache, ref, first, a.runs)
            rows.append({"version": name, "ready_median_s": statistics.median(ready),
                         "one_median_s": statistics.median(one), "one_max_s": max(one),
                         "pods8_median_s": statistics.median(gang), "pods8_max_s": max(gang)})
    finally:
        plugin.close()
        out = subprocess.run([a.sealvol, "volume", "mounts", "--json"], env=env, capture_output=True, text=True)
        for m in json.loads(out.stdout or '{"mounts": []}')["mounts"]:
            subprocess.run([a.sealvol, "volume", "unmount", "--lazy", m["dir"]], env=env, capture_output=True)

    print(f"| version | publish answered, median | first byte, median | max | {PODS} pods at once: first byte, median | max |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['version']} | {r['ready_median_s']:.3f} s | {r['one_median_s']:.3f} s | {r['one_max_s']:.3f} s | "
              f"{r['pods8_median_s']:.3f} s | {r['pods8_max_s']:.3f} s |")
    print(json.dumps({"runs": a.runs, "rows": rows}))


if __name__ == "__main__":
    main()
