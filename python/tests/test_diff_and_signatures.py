"""`diff` and `verify_signature` from Python: the CLI's answers, as dicts."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import sealvol

FIXTURES = Path(__file__).resolve().parents[2] / "engine" / "sign" / "tests" / "fixtures"


def test_a_diff_names_the_files_and_tensors_that_changed(repo):
    src = repo / "src"
    src.mkdir()
    rng = np.random.default_rng(1)
    a = {"w": rng.standard_normal((256, 256), dtype=np.float32), "b": np.zeros(8, np.float32)}
    save_file(a, str(src / "m.safetensors"))
    (src / "config.json").write_bytes(b"{}")
    client = sealvol.Client()
    v1 = client.push(src, "t/m", tag="prod")
    a["b"] = np.ones(8, np.float32)
    save_file(a, str(src / "m.safetensors"))
    (src / "new.txt").write_bytes(b"new")
    v2 = client.push(src, "t/m", tag="canary")
    d = client.diff("t/m:prod", "canary")
    assert d["totals"]["added"] == 1 and d["totals"]["modified"] == 1
    changed = {f["path"]: f for f in d["files"] if f["status"] != "unchanged"}
    assert set(changed) == {"m.safetensors", "new.txt"}
    tensors = {t["name"]: t["status"] for t in changed["m.safetensors"]["tensors"]}
    assert tensors == {"b": "modified", "w": "unchanged"}, tensors
    assert client.diff(v2.ref, v2.ref)["totals"]["modified"] == 0
    with pytest.raises(sealvol.NotFound):
        client.diff("t/m:prod", "nope")


def test_a_signature_verifies_with_its_key_and_not_with_another(repo, sealvol_bin):
    src = repo / "src"
    src.mkdir()
    (src / "w.bin").write_bytes(b"weights")
    v = sealvol.Client().push(src, "t/m")
    subprocess.run(
        [sealvol_bin, "volume", "sign", v.ref, "--key", str(FIXTURES / "signer.key.pem")],
        check=True,
        capture_output=True,
    )
    client = sealvol.Client()
    ok = client.verify_signature(v.ref, [FIXTURES / "signer.pub.pem"])
    assert ok["valid"] is True and ok["ref"] == v.ref and ok["why"] is None
    bad = client.verify_signature(v.ref, [FIXTURES / "other.pub.pem"])
    assert bad["valid"] is False and bad["why"]
    with pytest.raises(sealvol.Error) as e:
        client.verify_signature(v.ref, [FIXTURES / "ed25519.pub.pem"])
    assert "Ed25519" in str(e.value)
