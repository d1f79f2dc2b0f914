#!/usr/bin/env python3
"""moto's S3 server with its writes taken one at a time: `moto_serial.py HOST PORT`.
PORT 0 takes a free port and prints it on the first line of stdout: a port a test
picked free beforehand may be taken by another test's server before this one binds.

moto checks a write's condition (If-Match, If-None-Match) and then writes, with no lock
between, on a threaded server; on a busy machine two conditional writes of one key can
both pass, which real S3 never allows (and which sealvol's tag moves rely on). Here every
PUT, POST and DELETE runs alone, its response read whole inside the lock; reads stay
concurrent, so slow readers and throttled replies behave as before.

moto also answers a ranged GET by copying the whole object twice under the object's
lock, then slicing: concurrent range reads of one large pack take turns, each paying
for the whole pack, which real S3 never does (a ring of cache servers reading 4 MiB
segments of a 1 GiB pack waited 0.6 s each). A plain ranged GET (one range, no
condition, no version, credentials not checked) is answered here from the stored
bytes it asks for alone; anything else goes to moto.
"""
import os
import re
import sys
import threading
import urllib.parse

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

app = DomainDispatcherApplication(create_backend_app)
writes = threading.Lock()


RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")
# With credentials checked (INITIAL_NO_AUTH_ACTION_COUNT), every read goes to moto.
FAST_RANGES = "INITIAL_NO_AUTH_ACTION_COUNT" not in os.environ


def ranged(environ, start_response):
    """A plain ranged GET of a stored object answered from its bytes, or None."""
    m = RANGE.match(environ.get("HTTP_RANGE", ""))
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    if (environ.get("REQUEST_METHOD") != "GET" or not m or not FAST_RANGES
            or any(k.startswith("HTTP_IF_") for k in environ)
            or set(query) - {"x-id"}):
        return None
    path = urllib.parse.unquote(environ.get("PATH_INFO", ""))
    bucket, _, name = path.lstrip("/").partition("/")
    if not name:
        return None
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    try:
        key = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].buckets[bucket].keys.get(name)
    except KeyError:
        return None
    if key is None or not hasattr(key, "_value_buffer"):
        return None
    begin, end = int(m.group(1)), int(m.group(2))
    size = key.size
    if begin >= size or end < begin:
        return None
    end = min(end, size - 1)
    with key.lock:
        key._value_buffer.seek(begin)
        body = key._value_buffer.read(end - begin + 1)
    start_response("206 Partial Content", [
        ("Content-Type", "binary/octet-stream"),
        ("Content-Length", str(len(body))),
        ("Content-Range", f"bytes {begin}-{end}/{size}"),
        ("Accept-Ranges", "bytes"),
        ("ETag", key.etag),
        ("Last-Modified", key.last_modified_RFC1123),
    ])
    return [body]


def serialized(environ, start_response):
    fast = ranged(environ, start_response)
    if fast is not None:
        return fast
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
    server = make_server(sys.argv[1], int(sys.argv[2]), serialized, threaded=True)
    print(server.server_port, flush=True)
    server.serve_forever()
