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

    python3 tests/servers/oci_registry.py --layout DIR [flags]
prints "listening on http://127.0.0.1:PORT" once ready.
"""
import argparse
import base64
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
    a = ap.parse_args()
    layout = Path(a.layout)
    blobs = layout / "blobs" / "sha256"
    index = json.loads((layout / "index.json").read_text())
    names = {m.get("annotations", {}).get("org.opencontainers.image.ref.name"): m["digest"] for m in index["manifests"]}
    largest = max(blobs.iterdir(), key=lambda p: p.stat().st_size).name

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

        def authorised(self):
            if not a.token or self.headers.get("Authorization") == f"Bearer {a.token}":
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
                return self.reply(200, json.dumps({"token": a.token}).encode())
            if not self.authorised():
                return
            if path == "/v2/":
                return self.reply(200, b"{}")
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
