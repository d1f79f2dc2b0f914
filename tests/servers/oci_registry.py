#!/usr/bin/env python3
"""A hostile OCI registry for the `oci://` source's tests: serves the images of an OCI
image layout (read-only, `/v2/REPO/manifests/NAME` and `/v2/REPO/blobs/DIGEST` for any
REPO) and misbehaves on request, as a real registry never would in a test:

  --token TOKEN   answer /v2/ with 401 and `WWW-Authenticate: Bearer realm=…/token,
                  service=test`; /token gives TOKEN to basic credentials user:pass;
                  every other request needs `Authorization: Bearer TOKEN`
  --flip          send the largest blob with one byte flipped (its digest no longer holds)
  --cut           send half of the largest blob, then close the connection
  --stall         send the largest blob's headers, then nothing
  --huge          answer every manifest with 5 MiB of JSON
  --move NAME     once a tag's manifest was sent, the tag names the image NAME instead
                  (a tag moved during an import)

It also takes pushes (blobs whole or in pieces, then manifests under tags, kept in the
layout), and misbehaves on those too:

  --cut-piece N   the Nth piece (PATCH) is read half, kept, and the connection closed
  --fail-pieces N after the first piece, the next N pieces are answered 500 unread
  --pull-only-token  with --token: a token asked without push scope cannot push

GET /stats answers what pushes sent: {"received": bytes, "pieces": n, "mounts": n}.

    python3 tests/servers/oci_registry.py --layout DIR [flags]
prints "listening on http://127.0.0.1:PORT" once ready.
"""
import argparse
import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", required=True)
    ap.add_argument("--token")
    ap.add_argument("--flip", action="store_true")
    ap.add_argument("--cut", action="store_true")
    ap.add_argument("--stall", action="store_true")
    ap.add_argument("--huge", action="store_true")
    ap.add_argument("--move")
    ap.add_argument("--cut-piece", type=int)
    ap.add_argument("--fail-pieces", type=int, default=0)
    a = ap.parse_args()
    layout = Path(a.layout)
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    index_file = layout / "index.json"
    index = json.loads(index_file.read_text()) if index_file.exists() else {"manifests": []}
    names = {m.get("annotations", {}).get("org.opencontainers.image.ref.name"): m["digest"] for m in index["manifests"]}
    largest = max(blobs.iterdir(), key=lambda p: p.stat().st_size).name if any(blobs.iterdir()) else None
    uploads = {}
    stats = {"received": 0, "pieces": 0, "mounts": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, body=b"", headers=()):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def authorised(self, push=False):
            given = self.headers.get("Authorization")
            if not a.token or given == f"Bearer {a.token}-push" or (not push and given == f"Bearer {a.token}"):
                return True
            host = self.headers.get("Host")
            self.reply(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                       [("WWW-Authenticate", f'Bearer realm="http://{host}/token",service="test"')])
            return False

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/token":
                want = "Basic " + base64.b64encode(b"user:pass").decode()
                if self.headers.get("Authorization") != want or "scope=repository" not in self.path:
                    return self.reply(401)
                # Only a token asked with push scope may push.
                push = "%3Apull%2Cpush" in self.path or ":pull,push" in self.path
                return self.reply(200, json.dumps({"token": a.token + ("-push" if push else "")}).encode())
            if path == "/stats":
                return self.reply(200, json.dumps(stats).encode())
            if not self.authorised():
                return
            if path == "/v2/":
                return self.reply(200, b"{}")
            if "/blobs/uploads/" in path:
                up = uploads.get(path.rsplit("/", 1)[1])
                if up is None:
                    return self.reply(404, b'{"errors":[{"code":"BLOB_UPLOAD_UNKNOWN"}]}')
                return self.reply(204, b"", self.standing(path, up))
            parts = path.split("/")
            if len(parts) >= 5 and parts[-2] == "manifests":
                ref = parts[-1]
                digest = ref if ref.startswith("sha256:") else names.get(ref)
                if digest is None:
                    return self.reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
                if a.move and not ref.startswith("sha256:") and self.command == "GET":
                    names[ref] = names[a.move]
                body = (blobs / digest.split(":")[1]).read_bytes()
                if a.huge:
                    body = json.dumps({"pad": "x" * (5 << 20)}).encode()
                return self.reply(200, body, [("Content-Type", "application/vnd.oci.image.manifest.v1+json"),
                                              ("Docker-Content-Digest", digest)])
            if len(parts) >= 5 and parts[-2] == "blobs":
                name = parts[-1].split(":")[-1]
                f = blobs / name
                if not f.exists():
                    return self.reply(404)
                data = f.read_bytes()
                start, end = 0, len(data)
                rng = self.headers.get("Range")
                status = 200
                if rng:
                    first, last = rng.split("=")[1].split("-")
                    start, end = int(first), (int(last) + 1 if last else len(data))
                    status = 206
                body = data[start:end]
                if name == largest and a.flip:
                    body = bytearray(body)
                    body[len(body) // 2] ^= 1
                    body = bytes(body)
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
                self.end_headers()
                if self.command == "HEAD":
                    return
                if name == largest and a.stall:
                    time.sleep(3600)
                if name == largest and a.cut:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)
                return
            self.reply(404)

        def standing(self, path, up):
            # As the distribution registry says it: 0-0 for an empty upload.
            return [("Location", path), ("Range", f"0-{max(len(up) - 1, 0)}")]

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(n)
            with lock:
                stats["received"] += len(data)
            return data

        def do_POST(self):
            path, _, query = self.path.partition("?")
            if not self.authorised(push=True):
                return
            parts = path.split("/")
            if not path.endswith("/blobs/uploads/"):
                return self.reply(404)
            q = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
            if "mount" in q and "from" in q and (blobs / q["mount"].split(":")[-1]).exists():
                with lock:
                    stats["mounts"] += 1
                return self.reply(201, b"", [("Location", f"{path[:-len('uploads/')]}{q['mount']}")])
            uid = f"u{len(uploads)}"
            uploads[uid] = bytearray()
            return self.reply(202, b"", [("Location", path + uid), ("Range", "0-0")])

        def do_PATCH(self):
            path = self.path.split("?", 1)[0]
            if not self.authorised(push=True):
                return
            up = uploads.get(path.rsplit("/", 1)[1])
            if up is None:
                return self.reply(404)
            with lock:
                stats["pieces"] += 1
                n = stats["pieces"]
            if 1 < n <= 1 + a.fail_pieces:
                self.close_connection = True
                return self.reply(500, b'{"errors":[{"code":"UNKNOWN","message":"told to fail"}]}')
            start = int(self.headers["Content-Range"].split("-")[0])
            if start != len(up):
                self.close_connection = True
                return self.reply(416, b'{"errors":[{"code":"BLOB_UPLOAD_INVALID"}]}')
            if a.cut_piece == n:
                half = int(self.headers["Content-Length"]) // 2
                up += self.rfile.read(half)
                with lock:
                    stats["received"] += half
                self.close_connection = True
                return
            up += self.body()
            return self.reply(202, b"", self.standing(path, up))

        def do_PUT(self):
            path, _, query = self.path.partition("?")
            if not self.authorised(push=True):
                return
            parts = path.split("/")
            if len(parts) >= 5 and parts[-2] == "manifests":
                data = self.body()
                digest = "sha256:" + hashlib.sha256(data).hexdigest()
                (blobs / digest.split(":")[1]).write_bytes(data)
                names[parts[-1]] = digest
                return self.reply(201, b"", [("Docker-Content-Digest", digest)])
            up = uploads.get(parts[-1])
            if up is None:
                return self.reply(404)
            up += self.body()
            digest = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("digest", "")
            if digest != "sha256:" + hashlib.sha256(up).hexdigest():
                return self.reply(400, b'{"errors":[{"code":"DIGEST_INVALID","message":"digest did not match"}]}')
            (blobs / digest.split(":")[1]).write_bytes(bytes(up))
            del uploads[parts[-1]]
            return self.reply(201, b"", [("Location", f"/v2/blobs/{digest}")])

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(f"listening on http://127.0.0.1:{srv.server_address[1]}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
