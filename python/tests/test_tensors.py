"""`client.tensors()`: a `.safetensors` file's header through the engine's bounded
parser, each tensor read alone and equal to what safetensors itself wrote, and crafted
headers refused in one line."""

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import load, save_file

import sealvol


@pytest.fixture
def model(repo):
    src = repo / "src"
    src.mkdir()
    rng = np.random.default_rng(3)
    tensors = {
        "embed.weight": rng.standard_normal((1024, 1024), dtype=np.float32),  # 4 MiB
        "layer.0.bias": rng.standard_normal(77).astype(np.float16),
        "layer.0.scale": np.arange(12, dtype=np.int64).reshape(3, 4),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "mask": np.array([True, False, True]),
    }
    save_file(tensors, str(src / "model.safetensors"), metadata={"format": "np", "step": "40"})
    client = sealvol.Client()
    v = client.push(src, "t/model")
    return client, v, tensors, src


def test_each_tensor_reads_alone_and_is_what_safetensors_wrote(model):
    client, v, tensors, src = model
    t = client.tensors(v.ref, "model.safetensors")
    assert sorted(t.keys()) == sorted(tensors)
    assert len(t) == len(tensors) and "embed.weight" in t and "nope" not in t
    assert t.metadata() == {"format": "np", "step": "40"}
    info = t.info("embed.weight")
    assert (info.dtype, info.shape, info.end - info.begin) == ("F32", [1024, 1024], 4 << 20)
    for name, want in tensors.items():
        got = t.get(name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert np.array_equal(got, want), name
    assert t.get_bytes("layer.0.scale") == tensors["layer.0.scale"].tobytes()
    # The whole file through open() is what safetensors' own loader reads.
    with client.open(v.ref, "model.safetensors") as f:
        loaded = load(f.read())
    assert all(np.array_equal(loaded[k], tensors[k]) for k in tensors)
    with pytest.raises(sealvol.NotFound) as e:
        t.get("nope")
    assert "has no tensor 'nope'" in str(e.value)


def crafted(repo, name, header: bytes, tail: bytes = b"", length=None):
    src = repo / name
    src.mkdir()
    n = len(header) if length is None else length
    (src / "x.safetensors").write_bytes(struct.pack("<Q", n) + header + tail)
    return sealvol.Client().push(src, f"t/{name}")


@pytest.mark.parametrize(
    "name, header, tail, length, words",
    [
        ("huge", b"{}", b"", 1 << 40, "no header length that fits"),
        ("short", b"{}", b"", 1, "no header length that fits"),
        ("notjson", b"{not json", b"", None, "not a safetensors header"),
        (
            "outside",
            json.dumps({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode(),
            b"\0" * 8,
            None,
            "not a safetensors header",
        ),
        (
            "wrapping",
            json.dumps(
                {"a": {"dtype": "U8", "shape": [1], "data_offsets": [2**64 - 1, 2**64 - 1]}}
            ).encode(),
            b"",
            None,
            "not a safetensors header",
        ),
    ],
)
def test_a_crafted_header_is_refused_in_one_line(repo, name, header, tail, length, words):
    v = crafted(repo, name, header, tail, length)
    with pytest.raises(sealvol.Error) as e:
        sealvol.Client().tensors(v.ref, "x.safetensors")
    assert words in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_a_million_tensors_are_refused_at_the_limit_not_after_using_the_memory(repo):
    entries = ",".join(
        f'"t{i}":{{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}' for i in range(1_000_000)
    )
    v = crafted(repo, "million", ("{" + entries + "}").encode())
    with pytest.raises(sealvol.Error) as e:
        sealvol.Client().tensors(v.ref, "x.safetensors")
    assert "names more than" in str(e.value)
