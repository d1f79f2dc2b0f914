"""`sealvol://` through fsspec, registered by the wheel's entry point: listings, ranged
reads, find and glob, get, and pyarrow reading a parquet file out of a sealed version,
each compared byte for byte with the files pushed."""

import json
import os
import subprocess
import sys

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sealvol


@pytest.fixture
def version(repo):
    # fsspec keeps one filesystem per set of arguments: each test has a repository of
    # its own (SEALVOL_REPO), so none may find another test's filesystem.
    from sealvol.fs import SealvolFileSystem

    SealvolFileSystem.clear_instance_cache()
    src = repo / "src"
    (src / "shards").mkdir(parents=True)
    files = {
        "config.json": b'{"layers": 2}',
        "shards/a.bin": os.urandom(300_000),
        "shards/b.bin": os.urandom(1000),
    }
    for path, data in files.items():
        (src / path).write_bytes(data)
    table = pa.table({"id": list(range(1000)), "text": [f"row {i}" for i in range(1000)]})
    pq.write_table(table, src / "data.parquet")
    files["data.parquet"] = (src / "data.parquet").read_bytes()
    v = sealvol.Client().push(src, "t/m", tag="prod")
    return v, files, table


def test_listings_ranges_find_glob_and_get(version, repo):
    v, files, _ = version
    fs = fsspec.filesystem("sealvol")
    assert fs.ls("sealvol://t/m:prod", detail=False) == [
        "t/m:prod/config.json",
        "t/m:prod/data.parquet",
        "t/m:prod/shards",
    ]
    shards = fs.ls("t/m:prod/shards")
    assert [(e["name"], e["size"], e["type"]) for e in shards] == [
        ("t/m:prod/shards/a.bin", 300_000, "file"),
        ("t/m:prod/shards/b.bin", 1000, "file"),
    ]
    assert fs.info("t/m:prod/shards")["type"] == "directory"
    assert fs.isfile("t/m:prod/config.json") and not fs.exists("t/m:prod/nope")
    data = files["shards/a.bin"]
    assert fs.cat_file("t/m:prod/shards/a.bin") == data
    assert fs.cat_file("t/m:prod/shards/a.bin", start=1000, end=1010) == data[1000:1010]
    assert fs.cat_file("t/m:prod/shards/a.bin", start=-10) == data[-10:]
    assert sorted(fs.find("t/m:prod")) == sorted(f"t/m:prod/{p}" for p in files)
    assert fs.glob("t/m:prod/shards/*.bin") == ["t/m:prod/shards/a.bin", "t/m:prod/shards/b.bin"]
    # A pinned ref and the newest version name the same files.
    pinned = v.ref[len("vol:"):]
    assert fs.cat_file(f"{pinned}/config.json") == files["config.json"]
    assert fs.cat_file("t/m/config.json") == files["config.json"]
    out = repo / "got"
    fs.get("t/m:prod/shards", str(out), recursive=True)
    assert (out / "a.bin").read_bytes() == data
    with pytest.raises(FileNotFoundError):
        fs.info("t/m:prod/missing.bin")
    with pytest.raises(NotImplementedError):
        fs.open("t/m:prod/new.bin", "wb")


def test_fsspec_open_works_without_importing_sealvol(version):
    # A fresh interpreter: only the entry point can have registered the protocol.
    code = (
        "import fsspec, sys\n"
        "assert 'sealvol' not in sys.modules\n"
        "with fsspec.open('sealvol://t/m:prod/config.json') as f:\n"
        "    print(f.read().decode())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"layers": 2}


def test_pyarrow_reads_a_parquet_file_out_of_a_sealed_version(version):
    _, _, table = version
    fs = fsspec.filesystem("sealvol")
    got = pq.read_table("t/m:prod/data.parquet", filesystem=fs)
    assert got.equals(table)
