#!/usr/bin/env python3
"""An HTTP relay in front of a real S3 server (moto in tests) that makes the faults a
real server cannot be made to produce on demand. It does not answer in the server's
place: every request it lets through goes to the server as it came, except for what
its mode changes.

    s3_faults.py TARGET_PORT drop-conditions
        removes If-None-Match and If-Match from every request: an object store that
        ignores conditional writes.
    s3_faults.py TARGET_PORT cut-uploads N
        cuts the connection half-way through the body of the first N uploads of more
        than 1 MiB (PutObject or UploadPart): a network that drops a pack upload.
    s3_faults.py TARGET_PORT flip-reads
        flips one bit of the byte in the middle of every object body read (GetObject,
        not a listing), at the right length: a store or network that changes bytes.

prints "listening on PORT" once ready; writes one line per fault made to stderr.
"""
import http.client
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"cuts_left": 0}
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-connection"}


def say(line):
    """One line of the fault log, whole: print's text and its newline are two writes,
    which two handler threads interleave (two cuts once read as one line)."""
    with LOCK:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def read_body(handler):
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        out = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline()
    n = int(handler.headers.get("Content-Length", "0") or 0)
    return handler.rfile.read(n) if n else b""


class Relay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "drop-conditions"
    target = 0

    def log_message(self, *args):
        pass

    def relay(self):
        length = int(self.headers.get("Content-Length", "0") or 0)
        if self.mode == "cut-uploads" and self.command == "PUT" and length > (1 << 20):
            with LOCK:
                cut = STATE["cuts_left"] > 0
                if cut:
                    STATE["cuts_left"] -= 1
            if cut:
                self.rfile.read(length // 2)
                say(f"cut {self.path} after {length // 2} of {length} bytes")
                self.close_connection = True
                self.connection.shutdown(2)
                return
        body = read_body(self)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        if self.mode == "drop-conditions":
            for k in list(headers):
                if k.lower() in ("if-none-match", "if-match"):
                    del headers[k]
                    say(f"dropped {k} from {self.command} {self.path}")
        if "Transfer-Encoding" in self.headers:
            headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection("127.0.0.1", self.target, timeout=60)
        upstream.request(self.command, self.path, body=body, headers=headers)
        resp = upstream.getresponse()
        data = resp.read()
        object_read = "?" not in self.path or "x-id=GetObject" in self.path
        if (self.mode == "flip-reads" and self.command == "GET" and object_read
                and resp.status in (200, 206) and data):
            data = bytearray(data)
            data[len(data) // 2] ^= 0x01
            data = bytes(data)
            say(f"flipped a byte of {self.path}")
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            # A HEAD's length is the object's, not its (empty) body's.
            if k.lower() not in HOP and (k.lower() != "content-length" or self.command == "HEAD"):
                self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        upstream.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = relay


def main():
    Relay.target = int(sys.argv[1])
    Relay.mode = sys.argv[2]
    if Relay.mode == "cut-uploads":
        STATE["cuts_left"] = int(sys.argv[3])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
