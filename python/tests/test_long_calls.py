"""Long calls: progress reported as they go, and Ctrl-C (SIGINT) stopping a pull or a
push within a second, leaving what the CLI leaves: no file half-written under its
name, nothing sealed."""

import os
import subprocess
import sys
import textwrap

import pytest

import sealvol


@pytest.fixture
def big(repo):
    src = repo / "src"
    src.mkdir()
    for i in range(4):
        (src / f"shard-{i}.bin").write_bytes(os.urandom(8 << 20))
    return src


def test_progress_goes_from_nothing_to_the_whole_and_pull_then_push_agree(repo, big):
    client = sealvol.Client()
    seen = []
    v = client.push(big, "t/big", progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1] == 32 << 20, seen[-3:]
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    seen.clear()
    client.pull(v.ref, repo / "out", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (32 << 20, 32 << 20)
    for i in range(4):
        assert (repo / "out" / f"shard-{i}.bin").read_bytes() == (big / f"shard-{i}.bin").read_bytes()
    # A callback that raises stops the work with its exception's words printed.
    def boom(done, total):
        raise RuntimeError("stop here")

    with pytest.raises(sealvol.Error):
        client.pull(v.ref, repo / "out2", progress=boom)
    with pytest.raises(TypeError):
        client.pull(v.ref, repo / "out3", progress="yes")


def run_interrupted(repo, call):
    """`call` in a fresh interpreter that sends itself SIGINT at the first progress
    report; what it printed: the exception's name and the seconds from signal to it."""
    script = textwrap.dedent(
        f"""
        import os, signal, sys, threading, time
        import sealvol
        client = sealvol.Client()
        sent = []
        taken = threading.Event()
        def on_sigint(signum, frame):
            taken.set()
            raise KeyboardInterrupt
        signal.signal(signal.SIGINT, on_sigint)
        def follow(done, total):
            if not sent:
                sent.append(time.monotonic())
                os.kill(os.getpid(), signal.SIGINT)
                # Held (the GIL let go) until the caller's thread has taken the signal,
                # so the work cannot finish first however busy the machine is.
                taken.wait(120)
        try:
            {call}
            print("finished")
        except KeyboardInterrupt:
            print("interrupted", round(time.monotonic() - sent[0], 2))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_ctrl_c_stops_a_pull_and_leaves_no_file_half_written(repo, big):
    v = sealvol.Client().push(big, "t/big")
    out = repo / "out"
    said = run_interrupted(repo, f"client.pull({v.ref!r}, {str(out)!r}, progress=follow)")
    assert said[0] == "interrupted", said
    # Within a second when the machine is idle; the bound only catches a hang.
    assert float(said[1]) < 60, said
    for p in out.iterdir() if out.exists() else []:
        name = p.name
        if name.startswith("shard-"):
            assert p.stat().st_size == 8 << 20, f"{name} half-written"
        else:
            assert name.startswith(".sealvol-part-") is False, f"left {name}"


def test_ctrl_c_stops_a_push_and_seals_nothing(repo, big):
    said = run_interrupted(repo, f"client.push({str(big)!r}, 't/stopped', progress=follow)")
    assert said[0] == "interrupted", said
    assert float(said[1]) < 60, said
    assert all(v["name"] != "stopped" for v in sealvol.Client().volumes())
