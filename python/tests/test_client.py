"""The client on a local repository: a push from Python read back with `open` and
`pull` byte for byte, listings, and every bad input the issue names, each with the
CLI's words and nothing read or written."""

import io
import json
import multiprocessing
import os
import threading

import pytest

import sealvol


def tree(root, files):
    for path, data in files.items():
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


@pytest.fixture
def pushed(repo):
    rng = __import__("random").Random(7)
    files = {
        "config.json": json.dumps({"hidden_size": 1024}).encode(),
        "weights/model.bin": bytes(rng.getrandbits(8) for _ in range(3 << 20)),
        "notes.txt": b"first line\nsecond line\nthird\n",
        "empty": b"",
    }
    src = tree(repo / "src", files)
    client = sealvol.Client()
    v = client.push(src, "t/m", tag="prod", labels={"step": "1000"})
    return client, v, files, src


def test_a_push_reads_back_byte_for_byte_with_open_and_pull(pushed, repo):
    client, v, files, _ = pushed
    assert v.ref.startswith("vol:t/m@b3:") and len(v.digest) == 67
    assert v.tags == ["prod"] and v.labels == {"step": "1000"}
    assert sorted(f.path for f in v.files if f.kind == "file") == sorted(files)
    assert client.resolve("t/m:prod") == v
    for path, data in files.items():
        with client.open("t/m:prod", path) as f:
            assert f.read() == data
            assert f.size == len(data)
    with client.open(v.ref, "config.json") as f:
        assert json.load(f) == {"hidden_size": 1024}
    with client.open(v.ref, "notes.txt") as f:
        assert f.readline() == b"first line\n"
        assert list(f) == [b"second line\n", b"third\n"]
    with client.open(v.ref, "weights/model.bin") as f:
        data = files["weights/model.bin"]
        f.seek(1_000_000)
        assert f.tell() == 1_000_000
        assert f.read(10) == data[1_000_000:1_000_010]
        f.seek(-5, io.SEEK_END)
        assert f.read() == data[-5:]
        buf = bytearray(4096)
        f.seek(0)
        assert f.readinto(buf) == 4096 and bytes(buf) == data[:4096]
        # Past the end: nothing, as Python's own files.
        f.seek(len(data) + 100)
        assert f.read(10) == b""
    out = repo / "pulled"
    pulled = client.pull("t/m:prod", out)
    assert pulled.ref == v.ref
    for path, data in files.items():
        assert (out / path).read_bytes() == data
    # Only what include takes.
    part = repo / "part"
    client.pull(v.ref, part, include=["*.json"])
    assert sorted(os.listdir(part)) == ["config.json"]


def test_listings_say_what_the_cli_says(pushed):
    client, v, _, src = pushed
    (src / "config.json").write_bytes(b"{}")
    v2 = client.push(src, "t/m")
    assert v2.digest != v.digest
    assert [x["digest"] for x in client.versions("t/m")] == [v2.digest, v.digest]
    vols = client.volumes()
    assert [(x["namespace"], x["name"]) for x in vols] == [("t", "m")]
    assert [t["tag"] for t in client.tags("t/m")] == ["prod"]
    assert client.tag(v2.ref, "canary") == v2.ref
    assert client.resolve("t/m:canary").digest == v2.digest
    client.tag(v.ref, "eval", expires="30d")
    (eval_tag,) = [t for t in client.tags("t/m") if t["tag"] == "eval"]
    assert eval_tag["expires"] > "2026" and eval_tag["digest"] == v.digest
    for bad in ("soon", "-5s", "1999-01-01T00:00:00Z"):
        with pytest.raises(sealvol.InvalidRef) as e:
            client.tag(v.ref, "eval2", expires=bad)
        assert "expires=" in str(e.value)


@pytest.mark.parametrize(
    "ref, words",
    [
        ("t/m:nope", "nope"),
        ("t/mm", "did you mean t/m?"),
        ("t/m@b3:" + "0" * 64, "no version"),
    ],
)
def test_what_does_not_exist_is_not_found_with_the_clis_words(pushed, ref, words):
    client, *_ = pushed
    with pytest.raises(sealvol.NotFound) as e:
        client.resolve(ref)
    assert words in str(e.value)
    assert isinstance(e.value, sealvol.Error)


@pytest.mark.parametrize("ref", ["bad ref", "t/m@xyz", "", "t/m:Bad!"])
def test_a_malformed_ref_is_invalid(pushed, ref):
    client, *_ = pushed
    with pytest.raises(sealvol.InvalidRef):
        client.resolve(ref)


@pytest.mark.parametrize(
    "path, error, words",
    [
        ("../etc/passwd", sealvol.InvalidRef, "is not a path in a version"),
        ("a\0b", sealvol.InvalidRef, "is not a path in a version"),
        ("/config.json", sealvol.InvalidRef, "is not a path in a version"),
        ("weights", sealvol.Error, "is a folder"),
        ("nope.bin", sealvol.NotFound, "has no file nope.bin"),
    ],
)
def test_a_path_that_is_no_file_of_the_version_is_refused(pushed, path, error, words):
    client, v, *_ = pushed
    with pytest.raises(error) as e:
        client.open(v.ref, path)
    assert words in str(e.value)
    assert e.value.hint


def test_a_closed_file_and_bad_seeks_raise_as_pythons_own_files(pushed):
    client, v, *_ = pushed
    f = client.open(v.ref, "notes.txt")
    with pytest.raises(ValueError):
        f.seek(-1)
    f.close()
    with pytest.raises(ValueError):
        f.read()
    with pytest.raises(ValueError):
        f.seek(0)
    # A huge offset is past the end: nothing to read.
    with client.open(v.ref, "notes.txt") as f:
        f.seek(1 << 62)
        assert f.read() == b""


def test_a_bad_push_is_refused_and_seals_nothing(pushed, repo):
    client, *_ = pushed
    with pytest.raises(sealvol.InvalidRef):
        client.push(repo / "src", "not a volume")
    with pytest.raises(sealvol.InvalidRef):
        client.push(repo / "src", "t/m", labels={"Bad Key": "x"})
    with pytest.raises(sealvol.Error) as e:
        client.push(repo / "missing", "t/other")
    assert "missing: No such file or directory" in str(e.value)
    assert [(x["namespace"], x["name"]) for x in client.volumes()] == [("t", "m")]


def test_two_threads_read_one_file_object_and_each_gets_whole_reads(pushed):
    client, v, files, _ = pushed
    data = files["weights/model.bin"]
    f = client.open(v.ref, "weights/model.bin")
    lock = threading.Lock()
    errors = []

    def reader():
        for _ in range(20):
            with lock:
                f.seek(0)
                got = f.read(65536)
            if got != data[:65536]:
                errors.append("wrong bytes")

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # Two clients' files in two threads, no lock: each its own stream.
    results = {}

    def whole(name):
        with client.open(v.ref, "weights/model.bin") as g:
            results[name] = g.read()

    threads = [threading.Thread(target=whole, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == data for r in results.values()) and len(results) == 4


def _read_in_child(args):
    ref, path = args
    # A forked worker: the parent's engine is not used here, a new one is opened.
    client = _FORKED["client"]
    with client.open(ref, path) as f:
        return f.read()


_FORKED = {}


def test_forked_workers_open_and_read_as_a_dataloader_does(pushed):
    client, v, files, _ = pushed
    # The parent has used its engine (threads, open handles) before the fork.
    with client.open(v.ref, "weights/model.bin") as f:
        f.read(1000)
    _FORKED["client"] = client
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        got = pool.map(_read_in_child, [(v.ref, p) for p in sorted(files)])
    assert got == [files[p] for p in sorted(files)]
    # And the parent still reads.
    with client.open(v.ref, "config.json") as f:
        assert f.read() == files["config.json"]


def test_a_fork_in_the_middle_of_a_read_goes_on_in_both_processes(pushed):
    client, v, files, _ = pushed
    data = files["weights/model.bin"]
    f = client.open(v.ref, "weights/model.bin")
    head = f.read(100_000)
    pid = os.fork()
    if pid == 0:
        # The child reads on from where the parent was, through an engine of its own.
        try:
            ok = head + f.read() == data
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    rest = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert head + rest == data
