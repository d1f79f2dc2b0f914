"""pytest for the `sealvol` package, against the wheel built from the clone
(scripts/lanes.py builds and installs it before the suite runs), and for the Python
clients nobody here wrote against `sealvol serve` (test_hub_clients.py). The last lines are in
libtest's words, so that the suite's summary counts these tests with the Rust ones."""

import os
import signal
import subprocess

import pytest


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    skipped = len(stats.get("skipped", []))
    for report in stats.get("failed", []) + stats.get("error", []):
        terminalreporter.write_line(f"test {report.nodeid} ... FAILED")
    word = "ok" if failed == 0 else "FAILED"
    terminalreporter.write_line(
        f"test result: {word}. {passed} passed; {failed} failed; {skipped} ignored; 0 measured; 0 filtered out"
    )


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository of its own and a state folder, as the CLI's variables name them."""
    monkeypatch.setenv("SEALVOL_REPO", str(tmp_path / "repo"))
    monkeypatch.setenv("SEALVOL_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for var in ("SEALVOL_REMOTE", "SEALVOL_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def sealvol_bin():
    """The `sealvol` binary the suite built beside the wheel (for `serve`, `key`)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    path = os.path.join(target, "debug", "sealvol")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: run scripts/test.sh, which builds it")
    return path


@pytest.fixture
def serve(repo, sealvol_bin):
    """Starts `sealvol serve` on the fixture's repository, on loopback: returns the
    process, its URL and the admin key. Stopped (and woken first) when the test ends."""
    started = []

    def start(*extra, before=(), listen="127.0.0.1:0"):
        """`extra`: the server's flags; `before`: global ones (`--timeout 3s`)."""
        proc = subprocess.Popen(
            [sealvol_bin, "--repo", str(repo / "repo"), "--state", str(repo / "state"), *before,
             "serve", "--listen", listen, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        started.append(proc)
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://"), line
        key = (repo / "state" / "serve" / "admin.key").read_text().strip()
        return proc, line.split("listening on ")[1], key

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait()
