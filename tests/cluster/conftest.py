"""A real Spark standalone cluster on 127.0.0.1: one master, two workers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_NO_DAEMONIZE="1",
    )
    return env


def _wait_for(log: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and needle in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name} exited early:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {needle!r} in {log}")


@pytest.fixture(scope="session")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cluster's folder: master.log, worker<i>.log and each worker's work dir w<i>/.

    A worker keeps every executor it launched under ``w<i>/<app id>/<executor id>/`` with
    that executor's ``stdout`` and ``stderr``.
    """
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="session")
def spark_cluster(cluster_dir: Path) -> Iterator[str]:
    """Start master + 2 workers (1 core, 1 GiB each); yield the master URL."""
    work = cluster_dir
    env = cluster_env()
    spark_class = str(spark_home() / "bin" / "spark-class")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        mlog = work / "master.log"
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(_free_port())],
            stdout=mlog.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=work,
        )
        procs.append(master)
        _wait_for(mlog, "I have been elected leader", master, 90)
        for i in range(2):
            wlog = work / f"worker{i}.log"
            worker = subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                 "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                 "--work-dir", str(work / f"w{i}"), url],
                stdout=wlog.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=work,
            )
            procs.append(worker)
            _wait_for(wlog, "Successfully registered with master", worker, 90)
        yield url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def spark_submit(
    master: str,
    *args: str,
    timeout: float = 600,
    cwd: Path | None = None,
    conf: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``spark-submit [--conf k=v ...] <job file> args...`` in ``cwd``.

    The job file is ``carbonstore/cli/submit.py``, the only one.
    """
    import carbonstore.cli.submit as submit

    job = Path(submit.__file__)
    confs = {"spark.ui.enabled": "false", "spark.pyspark.python": sys.executable, **(conf or {})}
    cmd = [
        str(spark_home() / "bin" / "spark-submit"), "--master", master,
        *(a for k, v in confs.items() for a in ("--conf", f"{k}={v}")),
        "--executor-memory", "768m",
        str(job), *args,
    ]
    return subprocess.run(
        cmd, env=cluster_env(), capture_output=True, text=True, timeout=timeout, check=False,
        cwd=cwd,
    )
