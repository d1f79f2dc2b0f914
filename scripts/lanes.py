#!/usr/bin/env python3
"""Runs every test binary of the workspace, several at once, and ends with one line of
totals (scripts/test.sh calls it; README.md names that).

`cargo test` runs its test binaries one after another, and most of the suite's time
is spent waiting (on moto, on processes, on FUSE, on the clock a test moves), not
computing: several binaries at a time keep two cores busy. Each binary's output is
printed whole when it ends, never interleaved, under the same `Running` line cargo
prints. A binary that fails does not stop the others. The Python package's wheel is
built while the Rust binaries run; its tests start once it is installed.

The longest binaries start first, by the times of the previous run (kept in the
target directory), so no lane is left with one long binary at the end.

    python3 scripts/lanes.py [--lanes N]

The number of lanes is `--lanes`, else SEALVOL_TEST_LANES, else 4: on 2 cores the jobs
mostly wait, and the suite passed beside two CPU hogs at four (2026-12-07).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def build(root):
    """Builds every test target; returns (label, executable, package dir) for each."""
    cmd = [
        "cargo", "test", "--workspace", "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
    found = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        src = os.path.relpath(target["src_path"], root)
        unit = any(k in ("lib", "bin", "proc-macro") for k in target["kind"])
        label = f"{src} (unit tests)" if unit else src
        found.append((label, msg["executable"], str(Path(msg["manifest_path"]).parent)))
    if proc.wait() != 0:
        print("lanes: the test build failed; nothing was run", file=sys.stderr)
        sys.exit(101)
    return found


def build_wheel(root, target):
    """The Python package's wheel (python/), built with maturin into the same target
    directory and profile as the tests, and installed into the tests' virtual
    environment, where pytest imports it. Returns whether it was."""
    started = time.monotonic()
    wheels = Path(target) / "wheels"
    for old in wheels.glob("sealvol-*.whl"):
        old.unlink()
    cmd = [
        "maturin", "build", "--quiet", "-m", "python/Cargo.toml", "--profile", "dev",
        "--target-dir", str(target), "-o", str(wheels),
    ]
    if subprocess.call(cmd, cwd=root) != 0:
        print("lanes: the Python wheel did not build; its tests do not run", file=sys.stderr)
        return False
    wheel = sorted(wheels.glob("sealvol-*.whl"))
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--force-reinstall", "--no-deps", str(wheel[-1]) if wheel else "missing-wheel"]
    if not wheel or subprocess.call(install, cwd=root) != 0:
        print("lanes: the Python wheel did not install; its tests do not run", file=sys.stderr)
        return False
    # What the wheel adds to a run; the Rust tests run meanwhile.
    print(f"lanes: the Python wheel built and installed in {time.monotonic() - started:.0f} s",
          flush=True)
    return True


def count(output):
    """Totals from libtest's `test result:` lines, and the names of failed tests."""
    passed = failed = ignored = 0
    names = []
    for line in output.splitlines():
        if line.startswith("test result:"):
            words = line.split()
            passed += int(words[3])
            failed += int(words[5])
            ignored += int(words[7])
        elif line.endswith(" ... FAILED") and line.startswith("test "):
            names.append(line[len("test "):-len(" ... FAILED")])
    return passed, failed, ignored, names


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=int(os.environ.get("SEALVOL_TEST_LANES", "4")))
    args = parser.parse_args()
    root = Path(__file__).resolve().parent.parent
    target = Path(os.environ.get("CARGO_TARGET_DIR", root / "target"))
    times_file = target / "test-times.json"
    try:
        times = json.loads(times_file.read_text())
    except (OSError, ValueError):
        times = {}

    started = time.monotonic()
    # (label, command, folder, whether it needs the wheel)
    jobs = [(label, [exe], pkg, False) for label, exe, pkg in build(root)]
    # The wheel is built while the Rust tests run (they mostly wait): its features
    # differ from the test build's, so a cold one compiles minutes of crates again.
    wheel = {"built": None}
    wheel_done = threading.Event()

    def make_wheel():
        wheel["built"] = build_wheel(root, target)
        wheel_done.set()

    wheel_thread = threading.Thread(target=make_wheel)
    wheel_thread.start()
    # The Python package's tests, against the wheel, one job per file (together they
    # take minutes: one job would hold a lane alone); each ends with a `test result:`
    # line of libtest's, so they count in the totals below.
    for test_file in sorted((root / "python" / "tests").glob("test_*.py")):
        jobs.append((f"python/tests/{test_file.name} (pytest)",
                     [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                      str(test_file.relative_to(root))],
                     str(root), True))
    # Doc tests are compiled by rustdoc when they run: one more job.
    jobs.append(("doc-tests", ["cargo", "test", "--workspace", "--doc", "-q"], str(root), False))
    # Longest first; a binary never timed before counts as long.
    jobs.sort(key=lambda j: -times.get(j[0], 1e9))

    lock = threading.Lock()
    pending = list(jobs)
    totals = {"passed": 0, "failed": 0, "ignored": 0, "crashed": 0}
    failed_names = []
    new_times = {}

    def next_job():
        """The longest job that may start now: one that needs the wheel waits for it,
        while any other is left."""
        while True:
            with lock:
                if not pending:
                    return None
                for i, job in enumerate(pending):
                    if not job[3] or wheel_done.is_set():
                        return pending.pop(i)
            wheel_done.wait()

    def lane():
        while True:
            job = next_job()
            if job is None:
                return
            label, cmd, cwd, needs_wheel = job
            if needs_wheel and not wheel["built"]:
                with lock:
                    print(f"     Not run: {label} (the Python wheel did not build)", flush=True)
                    totals["crashed"] += 1
                    failed_names.append(f"{label} (not run: the Python wheel did not build)")
                continue
            t0 = time.monotonic()
            with tempfile.TemporaryFile(mode="w+") as out:
                # While the wheel builds, the tests yield the CPU to it: the Python
                # tests wait for it, and the Rust ones mostly wait on I/O anyway.
                lower = None if wheel_done.is_set() else (lambda: os.nice(10))
                rc = subprocess.call(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                     preexec_fn=lower)
                out.seek(0)
                text = out.read()
            took = time.monotonic() - t0
            passed, failed, ignored, names = count(text)
            with lock:
                new_times[label] = took
                print(f"     Running {label} ({took:.1f} s)", flush=True)
                sys.stdout.write(text)
                sys.stdout.flush()
                totals["passed"] += passed
                totals["failed"] += failed
                totals["ignored"] += ignored
                failed_names.extend(names)
                if rc != 0 and failed == 0:
                    totals["crashed"] += 1
                    failed_names.append(f"{label} (exited with {rc} and no failed test: a crash?)")

    threads = [threading.Thread(target=lane) for _ in range(max(1, args.lanes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wheel_thread.join()

    try:
        times.update(new_times)
        times_file.write_text(json.dumps(times, indent=1, sort_keys=True))
    except OSError:
        pass
    took = int(time.monotonic() - started)
    print(
        f"suite: {totals['passed']} passed, {totals['failed']} failed, "
        f"{totals['ignored']} ignored in {len(jobs)} test binaries, "
        f"{took // 60}m{took % 60:02d}s, {args.lanes} at a time"
    )
    if failed_names:
        print("failed:\n  " + "\n  ".join(failed_names))
    sys.exit(1 if failed_names else 0)


if __name__ == "__main__":
    main()
