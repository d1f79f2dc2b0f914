#!/usr/bin/env python3
"""Puts objects into a real S3 API server (moto in tests) with boto3, for sync tests.

    s3_seed.py ENDPOINT BUCKET PREFIX DIR      every file of DIR, as PREFIX/relative/path
    s3_seed.py ENDPOINT BUCKET --keys K=N...   objects named K holding N bytes ("" for a
                                               folder marker ending in /)
    s3_seed.py ENDPOINT --iam-user NAME [--only BUCKET]
                                               an IAM user allowed s3:* (on BUCKET only),
                                               and its access key (3 requests; for moto
                                               with auth): prints KEY_ID:SECRET
    s3_seed.py ENDPOINT --bucket NAME          creates the bucket (1 request)
    s3_seed.py ENDPOINT --put BUCKET KEY TEXT  one object holding TEXT
    s3_seed.py ENDPOINT --list BUCKET PREFIX   prints every key under PREFIX, in order

The bucket is created if missing. Credentials come from the AWS_* environment.
"""
import os
import sys

import boto3


def client(endpoint, service="s3"):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
    )


def ensure_bucket(s3, bucket):
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass


def main(argv):
    endpoint = argv[1]
    if argv[2] == "--iam-user":
        iam = client(endpoint, "iam")
        iam.create_user(UserName=argv[3])
        resource = '"*"'
        if len(argv) > 5 and argv[4] == "--only":
            resource = f'["arn:aws:s3:::{argv[5]}", "arn:aws:s3:::{argv[5]}/*"]'
        iam.put_user_policy(
            UserName=argv[3],
            PolicyName="s3-all",
            PolicyDocument='{"Version": "2012-10-17", "Statement": '
            f'[{{"Effect": "Allow", "Action": "s3:*", "Resource": {resource}}}]}}',
        )
        k = iam.create_access_key(UserName=argv[3])["AccessKey"]
        print(f"{k['AccessKeyId']}:{k['SecretAccessKey']}")
        return
    if argv[2] == "--bucket":
        client(endpoint).create_bucket(Bucket=argv[3])
        return
    if argv[2] == "--put":
        client(endpoint).put_object(Bucket=argv[3], Key=argv[4], Body=argv[5].encode())
        return
    if argv[2] == "--list":
        s3 = client(endpoint)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=argv[3], Prefix=argv[4]):
            for o in page.get("Contents", []):
                print(o["Key"])
        return
    bucket = argv[2]
    s3 = client(endpoint)
    ensure_bucket(s3, bucket)
    if argv[3] == "--keys":
        for spec in argv[4:]:
            key, n = spec.rsplit("=", 1)
            body = bytes((i * 7 + len(key)) % 251 for i in range(int(n)))
            s3.put_object(Bucket=bucket, Key=key, Body=body)
        return
    prefix, root = argv[3], argv[4]
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            key = f"{prefix.rstrip('/')}/{rel}" if prefix else rel
            s3.upload_file(path, bucket, key)


if __name__ == "__main__":
    main(sys.argv)
