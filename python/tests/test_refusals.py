"""What the engine refuses reaches Python as the exception a caller catches, with the
CLI's words, and nothing is read: a key scoped to another namespace, a version the
trust policy refuses, a damaged chunk, a server that stops answering."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import sealvol

FIXTURES = Path(__file__).resolve().parents[2] / "engine" / "sign" / "tests" / "fixtures"


def cli(bin, repo, *args):
    out = subprocess.run(
        [bin, "--repo", str(repo / "repo"), "--state", str(repo / "state"), *args],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def two_teams(repo):
    client = sealvol.Client()
    refs = {}
    for team in ("a", "b"):
        src = repo / f"src-{team}"
        src.mkdir()
        (src / "w.bin").write_bytes(team.encode() * 100_000)
        refs[team] = client.push(src, f"{team}/m").ref
    return client, refs


@pytest.fixture
def served(serve, two_teams):
    proc, url, _ = serve()
    return proc, url


def test_a_scoped_key_reads_its_namespace_through_serve_and_nothing_else(repo, sealvol_bin, served, two_teams):
    _, url = served
    _, refs = two_teams
    key = cli(sealvol_bin, repo, "key", "create", "team-a", "--namespace", "a")
    client = sealvol.Client(remote=url, api_key=key, state=str(repo / "client-state"))
    v = client.resolve("a/m")
    assert v.ref == refs["a"]
    with client.open(v.ref, "w.bin") as f:
        assert f.read() == b"a" * 100_000
    # The CLI's words: the server refuses the key for b's objects.
    with pytest.raises(sealvol.PermissionDenied) as e:
        client.open(refs["b"], "w.bin")
    assert "refused the API key" in str(e.value)
    # A key the server does not know.
    stranger = sealvol.Client(remote=url, api_key="sv_" + "0" * 40, state=str(repo / "s2"))
    with pytest.raises(sealvol.PermissionDenied):
        stranger.resolve("a/m")


def test_a_server_that_stops_answering_is_a_timeout_within_the_timeout(repo, served):
    proc, url = served
    key = (repo / "state" / "serve" / "admin.key").read_text().strip()
    client = sealvol.Client(remote=url, api_key=key, state=str(repo / "c"), timeout=2)
    client.resolve("a/m")
    proc.send_signal(signal.SIGSTOP)
    fresh = sealvol.Client(remote=url, api_key=key, state=str(repo / "c2"), timeout=2)
    start = time.monotonic()
    with pytest.raises(sealvol.Timeout):
        fresh.resolve("a/m")
    # Within the timeout and its retries, not a hang (generous: a busy machine).
    assert time.monotonic() - start < 60


def test_a_version_the_trust_policy_refuses_is_untrusted_and_nothing_is_read(repo, two_teams):
    _, refs = two_teams
    config = repo / "config" / "sealvol"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        f'[trust]\na = ["{FIXTURES / "signer.pub.pem"}"]\n'
    )
    client = sealvol.Client()
    with pytest.raises(sealvol.Untrusted) as e:
        client.open(refs["a"], "w.bin")
    assert "not signed by a key config.toml trusts for a" in str(e.value)
    assert e.value.hint
    with pytest.raises(sealvol.Untrusted):
        client.pull(refs["a"], repo / "out")
    assert not (repo / "out" / "w.bin").exists()
    # Another namespace is not policed.
    with client.open(refs["b"], "w.bin") as f:
        assert f.read(1) == b"b"


def test_a_damaged_chunk_is_damaged_and_never_wrong_bytes(repo, two_teams):
    _, refs = two_teams
    packs = [p for p in (repo / "repo" / "packs").rglob("*") if p.is_file()]
    for p in packs:
        data = bytearray(p.read_bytes())
        # The chunk bytes sit at the start of a pack (its table is at the end).
        data[100] ^= 0xFF
        p.write_bytes(bytes(data))
    client = sealvol.Client()
    with pytest.raises(sealvol.Damaged) as e:
        with client.open(refs["a"], "w.bin") as f:
            f.read()
    assert "\n" not in str(e.value)
