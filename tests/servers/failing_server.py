#!/usr/bin/env python3
"""An HTTP endpoint that answers every request with 500 Internal Server Error: a source
whose server is down in the way that a client must retry. No real S3 server can be made
to do this on demand, so this stands in for one in the tests of retries and cancel.
With `--status 403` it is an instance metadata service that refuses, as off EC2.

    failing_server.py [--status N]
prints "listening on PORT" once ready.
"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATUS = int(sys.argv[sys.argv.index("--status") + 1]) if "--status" in sys.argv else 500


class Failing(BaseHTTPRequestHandler):
    def answer(self):
        body = b"<Error><Code>InternalError</Code><Message>down</Message></Error>"
        self.send_response(STATUS)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = do_POST = answer

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
