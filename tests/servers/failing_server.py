#!/usr/bin/env python3
"""An HTTP endpoint that answers every request with 500 Internal Server Error: a source
whose server is down in the way that a client must retry. No real S3 server can be made
to do this on demand, so this stands in for one in the tests of retries and cancel.

    failing_server.py
prints "listening on PORT" once ready.
"""
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Failing(BaseHTTPRequestHandler):
    def answer(self):
        body = b"<Error><Code>InternalError</Code><Message>down</Message></Error>"
        self.send_response(500)
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
