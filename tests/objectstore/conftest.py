"""An S3 API server (moto) on 127.0.0.1 for the whole run, and a fresh s3:// store per test.

See s3fixtures.py: the server is a separate process started once and killed at the end; the
endpoint reaches the code as a user gives it (the conf key ``carbon.s3.endpoint``);
credentials are the standard AWS environment variables, set before any SparkSession starts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3fixtures import BUCKET, S3Server, S3Store, start_server, stop_server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = start_server()
    try:
        server.client().create_bucket(Bucket=BUCKET)
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def s3_store(s3_server: S3Server, tmp_path: Path) -> S3Store:
    conf = tmp_path / "carbon.properties"
    conf.write_text(
        f"carbon.s3.endpoint={s3_server.endpoint}\n"
        "carbon.s3.region=us-east-1\n"
        "carbon.lock.retry.timeout.sec=5\n"
        "carbon.clean.files.force.allowed=true\n",
        encoding="utf-8",
    )
    return S3Store(f"s3://{BUCKET}/t-{uuid.uuid4().hex[:12]}", conf, s3_server)
