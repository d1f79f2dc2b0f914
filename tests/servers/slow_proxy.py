#!/usr/bin/env python3
"""A TCP relay in front of a real server, for tests. It limits the bytes per second
flowing back, so that a test can kill a sync part-way through a transfer that is
otherwise over too soon to catch; and with LOG_FILE it notes the access key id of each
SigV4-signed request it relays (never a secret: the key id is the public half), so that
a test can tell which credentials a client used. It does not answer in the server's
place.

    slow_proxy.py TARGET_PORT BYTES_PER_SECOND [LOG_FILE|-] [CUT_BYTES]
prints "listening on PORT" once ready; a rate of 0 means no limit. With CUT_BYTES, each
connection is cut after that many bytes from the server: a network that drops long
transfers, which a client must read on from. With RELAY_COUNT=FILE in the environment,
it appends "up N" or "down N" for every piece relayed to or from the server: what a
client sent and received, to the byte.
"""
import os
import re
import socket
import sys
import threading
import time


KEY_ID = re.compile(rb"Credential=([A-Za-z0-9_-]+)/")
LOG_LOCK = threading.Lock()


COUNT = os.environ.get("RELAY_COUNT")


def pump(src, dst, rate, log=None, cut=0, direction="up"):
    sent = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if cut and sent + len(data) > cut:
                dst.sendall(data[: cut - sent])
                break
            sent += len(data)
            if COUNT:
                with LOG_LOCK, open(COUNT, "a") as f:
                    f.write(f"{direction} {len(data)}\n")
            if log:
                with LOG_LOCK, open(log, "ab") as f:
                    for m in KEY_ID.finditer(data):
                        f.write(m.group(1) + b"\n")
            dst.sendall(data)
            if rate:
                time.sleep(len(data) / rate)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    target, rate = int(sys.argv[1]), float(sys.argv[2])
    log = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    cut = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    print(f"listening on {lsock.getsockname()[1]}", flush=True)
    while True:
        client, _ = lsock.accept()
        upstream = socket.create_connection(("127.0.0.1", target))
        threading.Thread(target=pump, args=(client, upstream, 0, log), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, rate, None, cut, "down"), daemon=True).start()


if __name__ == "__main__":
    main()
