#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub, for sync tests (no hub is reachable here).

Serves real files from local directories as model or dataset repositories, speaking the
endpoints hf-hub and the resolve/download path use:

  GET  /api/{models|datasets}/ORG/NAME/revision/REV       repo info: sha, siblings (with
                                                           ?blobs=true: size, blobId, lfs)
  GET  /api/{models|datasets}/ORG/NAME/tree/REV[/PATH]    listing (recursive=1; paginated
                                                           with a Link header, limit=N)
  HEAD|GET /[datasets/]ORG/NAME/resolve/REV/PATH           small files directly; large
                                                           ("LFS") files by a 302 redirect
                                                           to /cdn/SHA256, like the real CDN
  HEAD|GET /cdn/SHA256                                      ranged downloads (206)

REV is a branch ("main"), or the commit sha the server derives from the files, which
changes when the files change. With --token, requests need `Authorization: Bearer TOKEN`
(401 without, 403 with a wrong one). Errors carry X-Error-Code (RepoNotFound,
RevisionNotFound, EntryNotFound) as the hub does.

Hashes as the Hub gives them: a file kept in git has `oid` (and ETag) the git blob id of
its bytes; an LFS file (LFS_MIN bytes or more) has `oid` the blob id of its *pointer*
and its bytes' SHA-256 in `lfs.oid` and X-Linked-Etag. --flip PATH sends that file
(of any repository) with one byte flipped in its middle, at the right length: a
source that sends the wrong bytes.

--log FILE appends a line per piece of a file body sent, "PATH BYTES", so a test can count what
was downloaded and by whom it was asked. --hold-after BYTES --gate FILE sends that
many file bytes in all, then holds every further body until FILE exists: a sync that
is surely mid-way, for as long as a test needs.

    python3 tests/servers/hf_server.py --port 0 --repo sentence-transformers/all-MiniLM-L6-v2=DIR
prints "listening on http://127.0.0.1:PORT" once ready.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlparse

LFS_MIN = 1 << 20  # files this large are served like LFS objects: via a redirect


class Repo:
    def __init__(self, kind, repo_id, root):
        self.kind, self.id, self.root = kind, repo_id, Path(root)
        self.files = {}
        for p in sorted(self.root.rglob("*")):
            if p.is_file():
                rel = p.relative_to(self.root).as_posix()
                data = p.read_bytes()
                sha256 = hashlib.sha256(data).hexdigest()
                # What git holds: the bytes, or for an LFS file the pointer to them.
                held = data
                if len(data) >= LFS_MIN:
                    held = (f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\n"
                            f"size {len(data)}\n").encode()
                self.files[rel] = {
                    "rel": rel,
                    "path": p,
                    "size": len(data),
                    "sha256": sha256,
                    "oid": hashlib.sha1(b"blob %d\0" % len(held) + held).hexdigest(),
                }
        h = hashlib.sha1()
        for rel, f in self.files.items():
            h.update(f"{rel}\0{f['sha256']}\n".encode())
        self.sha = h.hexdigest()
        self.trees = {}

    def revision_ok(self, rev):
        return rev in ("main", self.sha)


class Hub:
    def __init__(self, repos, token, log=None, hold_after=None, gate=None, flip=(), unserved=()):
        self.flip = set(flip)
        self.unserved = set(unserved)
        self.repos = {(r.kind, r.id): r for r in repos}
        self.by_sha256 = {f["sha256"]: f for r in repos for f in r.files.values()}
        self.token = token
        self.cdn_host = None
        self.log, self.hold_after, self.gate = log, hold_after, gate
        self.sent = 0
        self.lock = threading.Lock()

    def may_send(self, n):
        """Waits, while held, until the gate opens; counts what is sent."""
        import time
        while True:
            with self.lock:
                held = (
                    self.hold_after is not None
                    and self.sent + n > self.hold_after
                    and not os.path.exists(self.gate)
                )
                if not held:
                    self.sent += n
                    return
            time.sleep(0.05)

    def record(self, path, n):
        if self.log:
            with self.lock, open(self.log, "a") as out:
                out.write(f"{path} {n}\n")


def make_handler(hub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            if os.environ.get("HF_SERVER_LOG"):
                sys.stderr.write("hf_server: " + fmt % args + "\n")

        def error(self, status, code, message):
            body = json.dumps({"error": message}).encode()
            self.send_response(status)
            if code:
                self.send_header("X-Error-Code", code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def json(self, value, extra=()):
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def authorised(self):
            if not hub.token:
                return True
            auth = self.headers.get("Authorization", "")
            if not auth:
                self.error(401, None, "Invalid credentials in Authorization header")
                return False
            if auth != f"Bearer {hub.token}":
                self.error(403, None, "Access to this repository is restricted")
                return False
            return True

        def repo(self, kind, repo_id, rev):
            r = hub.repos.get((kind, repo_id))
            if r is None:
                self.error(401 if not hub.token else 404, "RepoNotFound", f"Repository {repo_id} not found")
                return None
            if not r.revision_ok(rev):
                self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
                return None
            return r

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            url = urlparse(self.path)
            path = unquote(url.path)
            query = parse_qs(url.query)
            if path.startswith("/cdn/"):
                f = hub.by_sha256.get(path[len("/cdn/"):])
                if f is None:
                    return self.error(404, "EntryNotFound", "no such object")
                return self.send_file(f, etag=f['sha256'])
            if not self.authorised():
                return
            m = re.fullmatch(r"/api/(models|datasets)/([^/]+/[^/]+)/(revision|tree)/([^/]+)(/.*)?", path)
            if m:
                kind = "dataset" if m.group(1) == "datasets" else "model"
                r = self.repo(kind, m.group(2), m.group(4))
                if r is None:
                    return
                if m.group(3) == "revision":
                    blobs = query.get("blobs", ["false"])[0] in ("1", "true", "True")
                    return self.json({
                        "id": r.id,
                        "sha": r.sha,
                        "siblings": [self.sibling(f, blobs) for f in r.files.values()],
                    })
                return self.tree(r, (m.group(5) or "").strip("/"), query)
            m = re.fullmatch(r"/(datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
            if m:
                kind = "dataset" if m.group(1) else "model"
                r = self.repo(kind, m.group(2), m.group(3))
                if r is None:
                    return
                f = r.files.get(m.group(4))
                if f is None or m.group(4) in hub.unserved:
                    return self.error(404, "EntryNotFound", f"{m.group(4)} does not exist")
                headers = [("X-Repo-Commit", r.sha)]
                if f["size"] >= LFS_MIN:
                    self.send_response(302)
                    # With --cdn-host, on another host name, as the Hub's CDN is: the
                    # Python client then takes the file's headers from this answer
                    # (it follows a redirect that stays on the host, never one off it).
                    cdn = f"http://{hub.cdn_host}:{self.server.server_address[1]}" if hub.cdn_host else ""
                    self.send_header("Location", f"{cdn}/cdn/{f['sha256']}")
                    self.send_header("X-Linked-Etag", f'"{f["sha256"]}"')
                    self.send_header("X-Linked-Size", str(f["size"]))
                    self.send_header("ETag", f'"{f["oid"]}"')
                    for k, v in headers:
                        self.send_header(k, v)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                return self.send_file(f, etag=f["oid"], extra=headers)
            self.error(404, None, "not found")

        def sibling(self, f, blobs):
            """A file as the Hub's info lists it; with ?blobs=true, its size and ids."""
            s = {"rfilename": f["rel"]}
            if blobs:
                s.update(size=f["size"], blobId=f["oid"])
                if f["size"] >= LFS_MIN:
                    s["lfs"] = {"sha256": f["sha256"], "size": f["size"], "pointerSize": 134}
            return s

        def tree(self, r, under, query):
            recursive = query.get("recursive", ["0"])[0] in ("1", "true", "True")
            key = (under, recursive)
            if key not in r.trees:
                r.trees[key] = self.entries(r, under, recursive)
            entries = r.trees[key]
            limit = int(query.get("limit", ["1000"])[0])
            start = int(query.get("cursor", ["0"])[0])
            page = entries[start:start + limit]
            extra = []
            if start + limit < len(entries):
                q = dict((k, v[0]) for k, v in query.items())
                q["cursor"] = str(start + limit)
                rel = urlparse(self.path)._replace(query="&".join(f"{k}={quote(v)}" for k, v in q.items())).geturl()
                # Absolute, as the Hub sends it (clients may not resolve a relative one).
                nxt = f"http://{self.headers.get('Host', '127.0.0.1')}{rel}"
                extra.append(("Link", f'<{nxt}>; rel="next"'))
            self.json(page, extra)

        def entries(self, r, under, recursive):
            """The whole listing, built once per (folder, recursive) and then paged."""
            items, dirs = [], set()
            for rel, f in r.files.items():
                if under and not rel.startswith(under + "/"):
                    continue
                rest = rel[len(under) + 1:] if under else rel
                if not recursive and "/" in rest:
                    d = (under + "/" if under else "") + rest.split("/")[0]
                    dirs.add(d)
                    continue
                if recursive:
                    parts = rest.split("/")[:-1]
                    for i in range(len(parts)):
                        dirs.add((under + "/" if under else "") + "/".join(parts[: i + 1]))
                item = {"type": "file", "oid": f["oid"], "size": f["size"], "path": rel}
                if f["size"] >= LFS_MIN:
                    item["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": 134}
                items.append(item)
            entries = [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d} for d in sorted(dirs)]
            return entries + items

        def send_file(self, f, etag, extra=()):
            size = f["size"]
            start, end = 0, size - 1
            rng = self.headers.get("Range")
            status = 200
            if rng:
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
                if not m or (m.group(1) == "" and m.group(2) == ""):
                    return self.error(416, None, "bad range")
                if m.group(1) == "":
                    start = max(0, size - int(m.group(2)))
                else:
                    start = int(m.group(1))
                    if m.group(2):
                        end = min(end, int(m.group(2)))
                if start >= size and size > 0:
                    return self.error(416, None, "range not satisfiable")
                status = 206
            length = max(0, end - start + 1)
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{etag}"')
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            if self.command == "HEAD" or length == 0:
                return
            middle = f["size"] // 2 if f["rel"] in hub.flip else -1
            with open(f["path"], "rb") as fh:
                fh.seek(start)
                left = length
                while left:
                    at = fh.tell()
                    b = fh.read(min(left, 64 << 10))
                    if not b:
                        break
                    if at <= middle < at + len(b):
                        b = bytearray(b)
                        b[middle - at] ^= 0x01
                        b = bytes(b)
                    hub.may_send(len(b))
                    # Counted before it is sent: a client that has read the whole
                    # body finds all of it in the log.
                    hub.record(self.path, len(b))
                    self.wfile.write(b)
                    left -= len(b)

    return Handler


def serve(port, repos, token=None, log=None, hold_after=None, gate=None, flip=(), cdn_host=None, unserved=()):
    """Starts the server on a thread; returns (server, base_url)."""
    hub = Hub(repos, token, log, hold_after, gate, flip, unserved)
    hub.cdn_host = cdn_host
    srv = ThreadingHTTPServer(("127.0.0.1", port), make_handler(hub))
    srv.daemon_threads = True
    # A client that goes away mid-download (a cancelled job, a killed server) is no
    # error of the stand-in's.
    base_error = srv.handle_error

    def handle_error(request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        base_error(request, client_address)

    srv.handle_error = handle_error
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--repo", action="append", default=[], help="ORG/NAME=DIR (a model)")
    ap.add_argument("--dataset", action="append", default=[], help="ORG/NAME=DIR")
    ap.add_argument("--token", help="require this bearer token")
    ap.add_argument("--log", help="append 'PATH BYTES' for each piece of a body sent")
    ap.add_argument("--hold-after", type=int, help="hold bodies after this many bytes...")
    ap.add_argument("--gate", help="...until this file exists")
    ap.add_argument("--flip", action="append", default=[], help="send this file (PATH in its repository) with one byte flipped")
    ap.add_argument("--unserved", action="append", default=[], help="list this file (PATH in its repository) but answer 404 for its bytes")
    ap.add_argument("--cdn-host", help="redirect large files to this host name (e.g. localhost), as to a CDN")
    a = ap.parse_args()
    if (a.hold_after is None) != (a.gate is None):
        ap.error("--hold-after and --gate go together")
    repos = [Repo("model", *spec.split("=", 1)) for spec in a.repo]
    repos += [Repo("dataset", *spec.split("=", 1)) for spec in a.dataset]
    srv, url = serve(a.port, repos, a.token, a.log, a.hold_after, a.gate, a.flip, a.cdn_host, a.unserved)
    print(f"listening on {url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        srv.shutdown()


if __name__ == "__main__":
    main()
