#!/usr/bin/env python3
"""Signing and verifying a version of many files (issue 38): `volume sign` (BLAKE3, from
the manifest: no file bytes read), `volume verify-signature` of that signature, and a
mount's policy check (`volume pull --include` of one small file under config.toml's
`[trust]`, against the same pull with no policy), through the real binary.

    python3 bench/sign.py --sealvol BIN [--files 100000] [--runs 3] [--work DIR]

A version of --files files of 1-64 bytes in 100 folders is pushed into a local
repository once. Each run signs it anew (ECDSA signatures differ each time), verifies
that one signature, then removes it. The process's own start (a `sealvol --version`)
is measured beside it. Prints a Markdown table and one JSON line; with --peer, also
model-signing's own BLAKE3 signing of the pulled folder (its Python API, which reads
and hashes every file).
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "engine" / "sign" / "tests" / "fixtures"


def run(env, *args):
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    took = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return took, p.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sealvol", required=True)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work")
    ap.add_argument("--peer", action="store_true", help="also time model-signing's API")
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="sealvol-sign-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = dict(os.environ, SEALVOL_REPO=str(work / "repo"), SEALVOL_STATE=str(work / "state"),
               SEALVOL_CACHE=str(work / "cache"), XDG_CONFIG_HOME=str(work / "config"),
               SEALVOL_FSYNC="0")
    src = work / "src"
    for i in range(a.files):
        d = src / f"d{i % 100:02}"
        if i < 100:
            d.mkdir(parents=True)
        (d / f"f{i}.txt").write_bytes(str(i).encode() * (1 + i % 16))
    _, pinned = run(env, a.sealvol, "-q", "volume", "push", str(src), "bench/many")
    key, public = FIXTURES / "signer.key.pem", FIXTURES / "signer.pub.pem"
    sigs = work / "repo" / "signatures"
    start, sign, verify, pull_free, pull_policed = [], [], [], [], []
    one = "d00/f0.txt"
    for r in range(a.runs):
        start.append(run(env, a.sealvol, "--version")[0])
        sign.append(run(env, a.sealvol, "-q", "volume", "sign", pinned, "--key", str(key))[0])
        verify.append(run(env, a.sealvol, "-q", "volume", "verify-signature", pinned,
                          "--public-key", str(public))[0])
        cfg = work / "config" / "sealvol" / "config.toml"
        cfg.unlink(missing_ok=True)
        pull_free.append(run(env, a.sealvol, "-q", "volume", "pull", pinned, str(work / f"free{r}"),
                             "--include", one)[0])
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(f'[trust]\nbench = ["{public}"]\n')
        pull_policed.append(run(env, a.sealvol, "-q", "volume", "pull", pinned, str(work / f"policed{r}"),
                                "--include", one)[0])
        cfg.unlink()
        shutil.rmtree(sigs)
    peer = None
    if a.peer:
        code = ("import sys, time, model_signing\n"
                "t = time.monotonic()\n"
                "model_signing.signing.Config().use_elliptic_key_signer(private_key=sys.argv[1])"
                ".set_hashing_config(model_signing.hashing.Config().use_file_serialization(hashing_algorithm='blake3'))"
                ".sign(sys.argv[2], sys.argv[3])\n"
                "print(time.monotonic() - t)\n")
        times = []
        for _ in range(a.runs):
            out = work / "tool.sig"
            out.unlink(missing_ok=True)
            _, t = run(env, sys.executable, "-c", code, str(key), str(src), str(out))
            times.append(float(t))
        peer = statistics.median(times)
    med = statistics.median
    rows = [
        ("process start (`sealvol --version`)", med(start)),
        ("`volume sign` (BLAKE3, from the manifest)", med(sign)),
        ("`volume verify-signature` (one signature)", med(verify)),
        ("`volume pull --include` of one file, no policy", med(pull_free)),
        ("the same pull under `[trust]` (the policy's check included)", med(pull_policed)),
    ]
    if peer is not None:
        rows.append(("model-signing 1.1 API, BLAKE3, signing the folder (reads every file)", peer))
    print(f"| {a.files} files, median of {a.runs} | seconds |")
    print("| --- | --- |")
    for what, t in rows:
        print(f"| {what} | {t:.3f} |")
    print(json.dumps({"files": a.files, "runs": a.runs, "start": start, "sign": sign, "verify": verify,
                      "pull_free": pull_free, "pull_policed": pull_policed, "peer": peer}))


if __name__ == "__main__":
    main()
