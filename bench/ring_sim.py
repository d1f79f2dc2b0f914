#!/usr/bin/env python3
"""A model of a gang read through the cache ring at a scale this machine cannot
emulate: N nodes starting one cold version of V bytes at once, through S cache servers,
from an origin of a given bandwidth. Calibrated on the emulated cluster
(bench/cluster.py bench --json): the CPU each server and each mount spent per byte
there, and the origin's overhead over the version's size.

The model is a bottleneck (fluid) model of streaming reads: every stage runs at once,
so the gang takes as long as its slowest stage, plus one segment's latency:

    origin      V * overhead / origin_rate                  (each byte read once)
    server i    N * V_i / min(server_nic, server_cores / cpu_per_byte_served)
    node        V / min(node_nic, node_cores / cpu_per_byte_read)

where V_i is server i's share of the version: its segments (4 MiB) as rendezvous
hashing assigns them, drawn here by hashing segment names, so the busiest server's
excess over V/S is in. Without the ring every node reads the origin: N * V / origin
rate. Ordered peers (before the ring) made every node ask the first server: S = 1.

    ring_sim.py --calibration BENCH.json [--plots DIR] [--json]

First it checks itself: the model, given the emulated cluster's links and its 2 shared
cores, predicts the measured times of each bench row. Then it prints the table for
200 nodes and 130 GB (Dragonfly's published case), and draws PNG plots with
matplotlib if asked.
"""

import argparse
import hashlib
import json
import math
import os

SEGMENT = 4 << 20


def rate(text):
    """'800mbit' -> bytes per second."""
    for unit, mult in (("kbit", 1e3), ("mbit", 1e6), ("gbit", 1e9)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * mult / 8
    raise ValueError(text)


def busiest_share(volume, servers, seed=1):
    """The largest share of `volume` bytes any of `servers` owns under rendezvous
    hashing of 4 MiB segments (the same rule as engine/core/src/read/ring.rs, with
    BLAKE2b standing in for BLAKE3: both are uniform)."""
    if servers == 1:
        return 1.0
    names = [f"http://cache-{seed}-{i}:7420".encode() for i in range(servers)]
    counts = [0] * servers
    segments = math.ceil(volume / SEGMENT)
    for seg in range(segments):
        key = seg.to_bytes(8, "little")
        best = max(range(servers),
                   key=lambda i: hashlib.blake2b(names[i] + key, digest_size=8).digest())
        counts[best] += 1
    return max(counts) / segments


def gang_seconds(volume, nodes, servers, origin, server_rate, node_rate, overhead,
                 shared_cpu=None, seed=1):
    """Seconds for `nodes` to read `volume` through `servers` (0: straight from the
    origin). `shared_cpu` = (cores, cpu per byte at servers, cpu per byte at nodes)
    when every process shares one machine's cores (the emulated cluster)."""
    latency = SEGMENT / origin
    if servers == 0:
        t = max(nodes * volume / origin, volume / node_rate)
        if shared_cpu:
            cores, _, c_n = shared_cpu
            t = max(t, nodes * volume * c_n / cores)
        return t + latency
    share = busiest_share(volume, servers, seed)
    t = max(volume * overhead / origin,
            nodes * volume * share / server_rate,
            volume / node_rate)
    if shared_cpu:
        cores, c_s, c_n = shared_cpu
        t = max(t, nodes * volume * (c_s + c_n) / cores)
    return t + latency


def calibrate(bench):
    """CPU seconds per byte served (servers) and read (mounts), from the bench's gang
    rows through servers; the origin's overhead; and each row's prediction."""
    size = bench["mib"] << 20
    ring = [r for r in bench["rows"] if r["servers"] > 0]
    direct = [r for r in bench["rows"] if r["servers"] == 0]
    c_s = sum(r["server_cpu"] for r in ring) / sum(r["nodes"] * size for r in ring)
    c_n = sum(r["mount_cpu"] for r in ring) / sum(r["nodes"] * size for r in ring)
    c_d = (sum(r["mount_cpu"] for r in direct) / sum(r["nodes"] * size for r in direct)
           if direct else c_n)
    overhead = max(r["origin_ratio"] for r in ring if r["nodes"] > 1)
    link = rate(bench["link_rate"])
    origin = rate(bench["origin_rate"])
    checks = []
    for r in bench["rows"]:
        cpu = (bench["cores"], c_s, c_d if r["servers"] == 0 else c_n)
        predicted = gang_seconds(size, r["nodes"], r["servers"], origin, link, link,
                                 overhead, shared_cpu=cpu)
        checks.append((r["what"], r["seconds"], round(predicted, 2)))
    return c_s, c_n, overhead, checks


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calibration", required=True, help="bench/cluster.py bench's JSON line")
    p.add_argument("--volume-gb", type=float, default=130)
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--server-nic", default="25gbit")
    p.add_argument("--node-nic", default="25gbit")
    p.add_argument("--server-cores", type=int, default=16)
    p.add_argument("--node-cores", type=int, default=4,
                   help="cores a node's mount may use while the model loads")
    p.add_argument("--plots", help="a folder to draw PNG plots in (needs matplotlib)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    with open(a.calibration) as f:
        bench = json.loads(f.read().strip().splitlines()[-1])
    c_s, c_n, overhead, checks = calibrate(bench)
    print(f"calibration ({bench['mib']} MiB gang on the emulated cluster, {bench['cores']} cores):")
    print(f"  server: {c_s * 1e9:.3f} CPU-s per GB served ({1 / c_s / 1e9:.2f} GB/s a core)")
    print(f"  mount:  {c_n * 1e9:.3f} CPU-s per GB read ({1 / c_n / 1e9:.2f} GB/s a core)")
    print(f"  origin overhead: {overhead:.3f}x the version")
    print("  the model against the measurements:")
    for what, measured, predicted in checks:
        print(f"    {what:<24} measured {measured:>7.2f} s   model {predicted:>7.2f} s   "
              f"({(predicted - measured) / measured * 100:+.0f}%)")

    volume = a.volume_gb * 1e9
    server_rate = min(rate(a.server_nic), a.server_cores / c_s)
    node_rate = min(rate(a.node_nic), a.node_cores / c_n)
    one = gang_seconds(volume, 1, 16, 10e9, server_rate, node_rate, overhead)
    rows = []
    for origin_gbs in (1, 10):
        origin = origin_gbs * 1e9
        rows.append({"origin_gbs": origin_gbs, "servers": 0,
                     "seconds": gang_seconds(volume, a.nodes, 0, origin, server_rate, node_rate,
                                             overhead),
                     "origin_tb": a.nodes * volume / 1e12})
        for s in (1, 4, 16, 64):
            busiest = busiest_share(volume, s)
            rows.append({"origin_gbs": origin_gbs, "servers": s,
                         "seconds": gang_seconds(volume, a.nodes, s, origin, server_rate,
                                                 node_rate, overhead),
                         "origin_tb": volume * overhead / 1e12,
                         "busiest_share": busiest,
                         "busiest_tb_sent": a.nodes * volume * busiest / 1e12})
    print(f"\n{a.nodes} nodes, {a.volume_gb:.0f} GB, servers at {server_rate / 1e9:.2f} GB/s "
          f"each, nodes at {node_rate / 1e9:.2f} GB/s (one node alone: {one:.0f} s):")
    print(f"  {'origin':>8} {'servers':>8} {'minutes':>8} {'x one node':>10} {'origin TB':>10} "
          f"{'busiest server':>15}")
    for r in rows:
        r["vs_one_node"] = r["seconds"] / one
        load = (f"{r['busiest_share'] * 100:.1f}%, {r['busiest_tb_sent']:.2f} TB"
                if r["servers"] else "-")
        print(f"  {r['origin_gbs']:>5} GB/s {r['servers'] or 'none':>8} {r['seconds'] / 60:>8.1f} "
              f"{r['vs_one_node']:>10.1f} {r['origin_tb']:>10.2f} {load:>15}")
    if a.json:
        print(json.dumps({"c_s": c_s, "c_n": c_n, "overhead": overhead, "checks": checks,
                          "one_node_seconds": one, "rows": rows}))
    if a.plots:
        plot(a, rows, one, os.path.abspath(a.plots))


def plot(a, rows, one, folder):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(folder, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for origin_gbs, style in ((1, "o-"), (10, "x--")):
        pts = [r for r in rows if r["origin_gbs"] == origin_gbs and r["servers"]]
        ax.plot([r["servers"] for r in pts], [r["seconds"] / 60 for r in pts], style,
                label=f"through the ring, origin {origin_gbs} GB/s"
                + (" (the same: the servers are the limit)" if origin_gbs == 10 else ""))
        none = [r for r in rows if r["origin_gbs"] == origin_gbs and not r["servers"]][0]
        ax.axhline(none["seconds"] / 60, ls=":", color=ax.lines[-1].get_color(),
                   label=f"no ring (every node from the origin), {origin_gbs} GB/s")
    ax.axhline(one / 60, ls="--", color="grey", label="one node alone")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("cache servers in the ring")
    ax.set_ylabel("minutes until every node has read it")
    ax.set_title(f"{a.nodes} nodes start one cold {a.volume_gb:.0f} GB version (model)")
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "ring-gang-time.png"))

    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=110)
    ring = [r for r in rows if r["servers"]][0]["origin_tb"]
    none = [r for r in rows if not r["servers"]][0]["origin_tb"]
    ax.bar(["through the ring", "no ring"], [ring, none], color=["#4c9", "#c64"])
    ax.set_yscale("log")
    ax.set_ylabel("TB read from the origin")
    for i, v in enumerate([ring, none]):
        ax.text(i, v, f"{v:.2f} TB", ha="center", va="bottom")
    ax.set_title(f"origin traffic, {a.nodes} nodes x {a.volume_gb:.0f} GB")
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "ring-origin-traffic.png"))
    print(f"plots in {folder}")


if __name__ == "__main__":
    main()
