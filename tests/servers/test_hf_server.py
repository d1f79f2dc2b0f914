"""Checks that the local Hugging Face stand-in speaks the hub's endpoints as sync will
use them: run by scripts/test.sh (python3 -m unittest discover tests/servers)."""
import hashlib
import json
import os
import tempfile
import unittest
import urllib.error
import urllib.request
from pathlib import Path

import hf_server


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get(url, headers=None, method="GET", follow=True):
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    opener = urllib.request.build_opener() if follow else urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class HfServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        (root / "1_Pooling").mkdir()
        (root / "config.json").write_text('{"hidden_size": 384}')
        (root / "1_Pooling" / "config.json").write_text('{"pooling": "mean"}')
        cls.big = os.urandom(3 << 20)
        (root / "model.safetensors").write_bytes(cls.big)
        repo = hf_server.Repo("model", "org/model", root)
        cls.sha = repo.sha
        cls.srv, cls.url = hf_server.serve(0, [repo], token="hf_test")
        cls.auth = {"Authorization": "Bearer hf_test"}

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.tmp.cleanup()

    def test_revision_info_and_tree(self):
        s, _, body = get(f"{self.url}/api/models/org/model/revision/main", self.auth)
        info = json.loads(body)
        self.assertEqual((s, info["sha"]), (200, self.sha))
        self.assertEqual(len(info["siblings"]), 3)
        s, _, body = get(f"{self.url}/api/models/org/model/revision/{self.sha}", self.auth)
        self.assertEqual(s, 200)
        # Paginated listing: follow Link headers until the end.
        url, seen = f"{self.url}/api/models/org/model/tree/main?recursive=1&limit=2", []
        while url:
            s, h, body = get(url, self.auth)
            self.assertEqual(s, 200)
            seen += json.loads(body)
            link = h.get("Link")
            url = link[1:link.index(">")] if link else None
            self.assertTrue(url is None or url.startswith(self.url), url)  # absolute, like the Hub's
        files = {e["path"]: e for e in seen if e["type"] == "file"}
        self.assertEqual(set(files), {"config.json", "1_Pooling/config.json", "model.safetensors"})
        self.assertIn("lfs", files["model.safetensors"])
        # As on the Hub: an LFS file's oid is its pointer's blob id, lfs.oid its bytes'
        # SHA-256; a small file's oid is its bytes' blob id.
        big = files["model.safetensors"]
        self.assertEqual(big["lfs"]["oid"], hashlib.sha256(self.big).hexdigest())
        pointer = (f"version https://git-lfs.github.com/spec/v1\noid sha256:{big['lfs']['oid']}\n"
                   f"size {len(self.big)}\n").encode()
        self.assertEqual(big["oid"], hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest())
        small = b'{"hidden_size": 384}'
        self.assertEqual(files["config.json"]["oid"], hashlib.sha1(b"blob %d\0" % len(small) + small).hexdigest())
        self.assertIn("1_Pooling", [e["path"] for e in seen if e["type"] == "directory"])

    def test_resolve_small_direct_large_by_redirect_with_ranges(self):
        s, h, body = get(f"{self.url}/org/model/resolve/main/config.json", self.auth)
        self.assertEqual((s, body), (200, b'{"hidden_size": 384}'))
        self.assertEqual(h["X-Repo-Commit"], self.sha)
        s, h, _ = get(f"{self.url}/org/model/resolve/main/model.safetensors", self.auth, "HEAD", follow=False)
        self.assertEqual(s, 302)
        self.assertEqual(int(h["X-Linked-Size"]), len(self.big))
        cdn = self.url + h["Location"]
        s, h, body = get(cdn, {"Range": "bytes=1000-1999"})
        self.assertEqual((s, body), (206, self.big[1000:2000]))
        self.assertEqual(h["Content-Range"], f"bytes 1000-1999/{len(self.big)}")
        s, _, body = get(f"{self.url}/org/model/resolve/main/model.safetensors", self.auth)
        self.assertEqual((s, body), (200, self.big))

    def test_errors_name_what_is_wrong(self):
        s, h, _ = get(f"{self.url}/api/models/org/model/revision/nope", self.auth)
        self.assertEqual((s, h.get("X-Error-Code")), (404, "RevisionNotFound"))
        s, h, _ = get(f"{self.url}/api/models/org/other/revision/main", self.auth)
        self.assertEqual((s, h.get("X-Error-Code")), (404, "RepoNotFound"))
        s, h, _ = get(f"{self.url}/org/model/resolve/main/missing.bin", self.auth)
        self.assertEqual((s, h.get("X-Error-Code")), (404, "EntryNotFound"))
        self.assertEqual(get(f"{self.url}/api/models/org/model/revision/main")[0], 401)
        self.assertEqual(get(f"{self.url}/api/models/org/model/revision/main", {"Authorization": "Bearer no"})[0], 403)


class HoldAndLogTest(unittest.TestCase):
    def test_bodies_are_logged_and_held_at_the_gate(self):
        import threading
        with tempfile.TemporaryDirectory() as d:
            root = Path(d) / "m"
            root.mkdir()
            big = os.urandom(2 << 20)
            (root / "w.bin").write_bytes(big)
            log, gate = Path(d) / "log", Path(d) / "gate"
            srv, url = hf_server.serve(
                0, [hf_server.Repo("model", "o/m", root)], log=str(log), hold_after=1 << 20, gate=str(gate)
            )
            try:
                got = {}
                t = threading.Thread(
                    target=lambda: got.setdefault("r", get(f"{url}/o/m/resolve/main/w.bin"))
                )
                t.start()
                t.join(1.0)
                self.assertTrue(t.is_alive(), "held at the gate")
                gate.touch()
                t.join(10)
                self.assertEqual(got["r"][2], big)
                sent = sum(int(l.rsplit(" ", 1)[1]) for l in log.read_text().splitlines())
                self.assertEqual(sent, len(big))
            finally:
                srv.shutdown()


if __name__ == "__main__":
    unittest.main()
