#!/usr/bin/env python3
"""Puts files into a cloud storage emulator, for sync tests.

    cloud_seed.py azure ENDPOINT CONTAINER PREFIX DIR   every file of DIR as PREFIX/rel/path
    cloud_seed.py gcs ENDPOINT BUCKET PREFIX DIR        the same into a GCS emulator

Azure goes through the azure-storage-blob package, with Azurite's well-known development
account; GCS through the JSON API's multipart upload (the emulator refuses a 0-byte
body in a plain media upload).
"""
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def files(root, prefix):
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            path = os.path.join(dirpath, n)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            yield path, (f"{prefix.rstrip('/')}/{rel}" if prefix else rel)


def azure(endpoint, container, prefix, root):
    from azure.storage.blob import BlobServiceClient

    conn = (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={AZURITE_KEY};BlobEndpoint={endpoint}/devstoreaccount1;"
    )
    svc = BlobServiceClient.from_connection_string(conn)
    c = svc.get_container_client(container)
    if not c.exists():
        c.create_container()
    for path, key in files(root, prefix):
        with open(path, "rb") as f:
            c.upload_blob(key, f, overwrite=True)


def gcs(endpoint, bucket, prefix, root):
    def call(method, url, body, content_type):
        req = urllib.request.Request(url, data=body, method=method)
        req.add_header("Content-Type", content_type)
        return urllib.request.urlopen(req).read()

    try:
        call(
            "POST",
            f"{endpoint}/storage/v1/b",
            json.dumps({"name": bucket}).encode(),
            "application/json",
        )
    except urllib.error.HTTPError as e:
        if e.code != 409:  # the bucket exists already
            raise
    boundary = "sealvol-seed-boundary"
    for path, key in files(root, prefix):
        with open(path, "rb") as f:
            data = f.read()
        body = (
            f"--{boundary}\r\nContent-Type: application/json\r\n\r\n"
            + json.dumps({"name": key})
            + f"\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
        ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        call(
            "POST",
            f"{endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=multipart",
            body,
            f"multipart/related; boundary={boundary}",
        )


if __name__ == "__main__":
    kind, endpoint, bucket, prefix, root = sys.argv[1:6]
    {"azure": azure, "gcs": gcs}[kind](endpoint, bucket, prefix, root)
