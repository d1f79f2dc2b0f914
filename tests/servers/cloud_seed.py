#!/usr/bin/env python3
"""Puts files into Azurite, for sync tests.

    cloud_seed.py azure ENDPOINT CONTAINER PREFIX DIR   every file of DIR as PREFIX/rel/path

Through the azure-storage-blob package, with Azurite's well-known development account.
"""
import os
import sys

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


if __name__ == "__main__":
    kind, endpoint, bucket, prefix, root = sys.argv[1:6]
    {"azure": azure}[kind](endpoint, bucket, prefix, root)
