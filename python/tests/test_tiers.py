"""Reading through the tiers a mount reads through: a peer (`serve` as a cache server),
the node cache warm and cold, and a server that stops answering in the middle."""

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import sealvol

SIZE = 3 << 20


def metric(url: str, key: str, name: str) -> float:
    req = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} is not in /metrics")


def cache_bytes(cache: Path) -> int:
    """Bytes of chunks a node cache holds (its segments)."""
    return sum(p.stat().st_size for p in (cache / "packs").glob("*.seg"))


@pytest.fixture
def weights(repo):
    """A version holding 3 MiB of noise, pushed to the local repository."""
    src = repo / "src-w"
    src.mkdir()
    data = os.urandom(SIZE)
    (src / "w.bin").write_bytes(data)
    return sealvol.Client().push(src, "a/w").ref, data


@pytest.fixture
def server(serve, weights):
    return serve()


def test_a_read_with_a_peer_takes_its_chunks_from_the_peer(repo, weights, server):
    ref, data = weights
    _, url, key = server
    before = metric(url, key, "sealvol_serve_bytes_served_total")
    client = sealvol.Client(peers=[url], api_key=key, state=str(repo / "node"))
    with client.open(ref, "w.bin") as f:
        assert f.read() == data
    served = metric(url, key, "sealvol_serve_bytes_served_total") - before
    # Every chunk came from the peer (the few KiB of proof edges at most twice).
    assert SIZE <= served <= 2 * SIZE, served


def test_a_warm_node_cache_serves_a_reader_when_the_server_stops_and_a_cold_one_times_out(
    repo, weights, server, monkeypatch
):
    ref, data = weights
    proc, url, key = server
    # A node's cache is its own (SEALVOL_CACHE, read when a client first opens).
    warm = repo / "warm-cache"
    monkeypatch.setenv("SEALVOL_CACHE", str(warm))
    first = sealvol.Client(remote=url, api_key=key, state=str(repo / "n1"))
    with first.open(ref, "w.bin") as f:
        assert f.read() == data
    # The cache is filled in the background: wait for it (a condition, not a time).
    deadline = time.monotonic() + 120
    while cache_bytes(warm) < SIZE:
        assert time.monotonic() < deadline, f"{cache_bytes(warm)} bytes cached"
        time.sleep(0.05)
    # Opened (the listing and the chunk list come from the server), then the server
    # stops answering: a warm node reads every byte from its cache, a cold one cannot.
    again = sealvol.Client(remote=url, api_key=key, state=str(repo / "n2"), timeout=2)
    warm_file = again.open(ref, "w.bin")
    monkeypatch.setenv("SEALVOL_CACHE", str(repo / "cold-cache"))
    cold = sealvol.Client(remote=url, api_key=key, state=str(repo / "n3"), timeout=2)
    cold_file = cold.open(ref, "w.bin")
    proc.send_signal(signal.SIGSTOP)
    assert warm_file.read() == data
    start = time.monotonic()
    with pytest.raises(sealvol.Timeout) as e:
        cold_file.read()
    # Within the timeout and its retries, not a hang (generous: a busy machine).
    assert time.monotonic() - start < 60
    assert "\n" not in str(e.value)


def test_a_large_file_read_whole_is_then_read_from_the_node_caches_whole_copy(repo, monkeypatch):
    cache = repo / "node-cache"
    monkeypatch.setenv("SEALVOL_CACHE", str(cache))
    src = repo / "src-big"
    src.mkdir()
    data = os.urandom(20 << 20)
    (src / "big.bin").write_bytes(data)
    client = sealvol.Client()
    ref = client.push(src, "a/big").ref
    with client.open(ref, "big.bin") as f:
        assert f.raw._native.backing_fd() is None
        assert f.read() == data
    # Read whole and closed, it is written whole into the node cache (in the background).
    deadline = time.monotonic() + 120
    while True:
        with client.open(ref, "big.bin") as f:
            if f.raw._native.backing_fd() is not None:
                break
        assert time.monotonic() < deadline, "the file was not kept whole"
        time.sleep(0.05)
    with client.open(ref, "big.bin") as f:
        f.seek(5)
        assert f.read(100) == data[5:105]
        f.seek(0)
        assert f.read() == data
        buf = bytearray(3 << 20)
        f.seek(len(data) - 1000)
        assert f.readinto(buf) == 1000 and buf[:1000] == data[-1000:]
    # A copy damaged on the node's disk is found at open, dropped, and never read.
    whole = max((p for p in (cache / "files").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    damaged = bytearray(whole.read_bytes())
    damaged[12345] ^= 0xFF
    whole.write_bytes(bytes(damaged))
    with client.open(ref, "big.bin") as f:
        assert f.raw._native.backing_fd() is None
        assert f.read() == data
