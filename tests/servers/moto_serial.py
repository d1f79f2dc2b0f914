#!/usr/bin/env python3
"""moto's S3 server with its writes taken one at a time: `moto_serial.py HOST PORT`.

moto checks a write's condition (If-Match, If-None-Match) and then writes, with no lock
between, on a threaded server; on a busy machine two conditional writes of one key can
both pass, which real S3 never allows (and which sealvol's tag moves rely on). Here every
PUT, POST and DELETE runs alone, its response read whole inside the lock; reads stay
concurrent, so slow readers and throttled replies behave as before.
"""
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

app = DomainDispatcherApplication(create_backend_app)
writes = threading.Lock()


def serialized(environ, start_response):
    if environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE"):
        with writes:
            body = app(environ, start_response)
            try:
                return [b"".join(body)]
            finally:
                close = getattr(body, "close", None)
                if close:
                    close()
    return app(environ, start_response)


if __name__ == "__main__":
    run_simple(sys.argv[1], int(sys.argv[2]), serialized, threaded=True)
