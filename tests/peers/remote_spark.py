"""Drive ``spark_sql_worker.py`` from a test: ``sql(...).collect()`` answers like a local SparkSession's.

A second SparkSession cannot start in a process that has one (the run's shared session uses Spark's
built-in Hive 2.3 client), so a session with another Hive client runs in a child process. Rows come back
as ``pyspark.sql.Row`` and Spark's ``AnalysisException`` as itself, so tests written against the shared
session run unchanged against this one.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.peers.spark_sql_worker import ANSWER_PREFIX

WORKER = Path(__file__).with_name("spark_sql_worker.py")


class RemoteResult:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def collect(self) -> list[Any]:
        return self.rows


class RemoteSpark:
    """A Spark SQL session in a child process; each statement waits at most ``timeout`` seconds."""

    def __init__(self, proc: subprocess.Popen[str], log_path: Path, timeout: float) -> None:
        self.proc, self.log_path, self.timeout = proc, log_path, timeout
        self.ready: dict[str, Any] = self._answer("starting Spark")

    def sql(self, statement: str) -> RemoteResult:
        from pyspark.errors import AnalysisException
        from pyspark.sql import Row

        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"sql": statement}) + "\n")
        self.proc.stdin.flush()
        reply = self._answer(statement)
        if "error" in reply:
            if reply["error"] == "AnalysisException":
                raise AnalysisException(message=reply["message"])
            raise RuntimeError(f"{statement}: {reply['error']}: {reply['message']}")
        columns = reply["columns"]
        return RemoteResult([Row(**dict(zip(columns, values, strict=True))) for values in reply["rows"]])

    def _answer(self, what: str) -> dict[str, Any]:
        """The worker's next answer; its other output (Spark's banner, warnings) is skipped."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if not selector.select(left):
                    break
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError(
                        f"{what}: the Spark worker exited; see {self.log_path}:\n{self._log_tail()}"
                    )
                if line.startswith(ANSWER_PREFIX):
                    return json.loads(line[len(ANSWER_PREFIX) :])
        raise TimeoutError(
            f"{what}: no answer from the Spark worker in {self.timeout:g} s; see {self.log_path}"
        )

    def _log_tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])


@contextmanager
def remote_spark(
    uri: str, warehouse: str, settings: dict[str, str], root: Path, *, timeout: float = 180.0
) -> Iterator[RemoteSpark]:
    """A Hive-enabled SparkSession on the metastore at ``uri`` with extra Spark ``settings``, in a child
    process with its working directory and log (``spark.log``) under ``root``; stopped after."""
    log_path = root / "spark.log"
    args = [sys.executable, str(WORKER), uri, warehouse, *(f"{k}={v}" for k, v in settings.items())]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=root,
            env=os.environ,
        )
    try:
        yield RemoteSpark(proc, log_path, timeout)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the worker stops its session at end of input
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
