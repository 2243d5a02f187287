"""Helpers of the object-store tests: the S3 API server process and a store on it.

The server is a separate process (tests/objectstore/s3server.py) started once and killed at
the end. The endpoint reaches the code under test the way a user gives it: the conf key
``carbon.s3.endpoint`` (a conf file for the CLI, a ``CarbonConf`` for the API), which the
store folds into the location its tasks get. Credentials come from the standard AWS
environment variables, set here before any SparkSession starts so its workers inherit them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# moto accepts any credentials; without them the AWS SDK would ask the EC2 metadata service.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "carbonstore-test")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "carbonstore-test")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

SERVER = Path(__file__).with_name("s3server.py")
BUCKET = "carbon-test"


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    process: subprocess.Popen[str]

    def client(self):  # noqa: ANN201 - a boto3 client
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def requests(self, *, reset: bool = False) -> dict[str, int]:
        """Requests the server answered so far, by kind (GET, HEAD, LIST, PUT, ...)."""
        import urllib.request

        req = urllib.request.Request(f"{self.endpoint}/__requests",
                                     method="DELETE" if reset else "GET")
        with urllib.request.urlopen(req, timeout=10) as resp:
            import json

            return dict(json.loads(resp.read()))


def start_server(*args: str) -> S3Server:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"the S3 server did not start: {line!r}")
    return S3Server(f"http://127.0.0.1:{int(line.split()[1])}", proc)


def stop_server(server: S3Server) -> None:
    server.process.kill()
    server.process.wait(timeout=30)


@dataclass(frozen=True)
class S3Store:
    """A fresh prefix of the bucket, the conf file that reaches it, and its server."""

    location: str
    conf_file: Path
    server: S3Server

    @property
    def prefix(self) -> str:
        return self.location.removeprefix(f"s3://{BUCKET}/")

    def conf(self, **overrides: str):  # noqa: ANN201 - a CarbonConf
        from carbonstore.store import load_conf

        return load_conf(self.conf_file).with_overrides(overrides) if overrides else load_conf(self.conf_file)

    def cli(self, *args: str) -> int:
        """``carbonstore --store LOCATION --conf FILE ARGS`` in this process."""
        from carbonstore.cli import main

        return main(["--store", self.location, "--conf", str(self.conf_file), *args])

    def keys(self) -> list[str]:
        client = self.server.client()
        out: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self.prefix + "/"):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return out

    def puts(self, *, conditional: bool = False) -> dict[str, int]:
        """Successful PUTs of every key under the prefix (2 or more: overwritten); with
        ``conditional``, only the put-if-absent ones (``If-None-Match: *``)."""
        import json
        import urllib.request

        kind = "__conditional_puts" if conditional else "__puts"
        with urllib.request.urlopen(f"{self.server.endpoint}/{kind}", timeout=10) as resp:
            counts = json.loads(resp.read())
        start = f"{BUCKET}/{self.prefix}/"
        return {k[len(BUCKET) + 1:]: n for k, n in counts.items() if k.startswith(start)}

    def hide_from_list(self, key: str | None) -> None:
        """Listings leave ``key`` (relative to the prefix) out; None: listings show all again."""
        import urllib.request

        url = f"{self.server.endpoint}/__hide_from_list"
        req = urllib.request.Request(url if key is None else f"{url}?{BUCKET}/{self.prefix}/{key}",
                                     method="DELETE" if key is None else "PUT")
        urllib.request.urlopen(req, timeout=10).close()
