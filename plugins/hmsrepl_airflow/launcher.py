"""Run an application for one task: on Spark when the work pays for a JVM, else as Python.

``spark_apps/repl_sync.py`` (and ``cm_cleanup.py``) is the same program either way. Submitted with spark-submit it gets the Spark
connection's cluster and resources; run as a plain Python process it starts no JVM at all unless a load
copies enough files to want Spark (then a client-mode session on the same master). Its exit code says
whether a failure is worth retrying (``spark_apps.common``: 1 outage, 2 bad options, 3 bad configuration or
refused input); this module turns that into Airflow's two kinds of failure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from hmsrepl_airflow.cluster_settings import (
    ClusterModeError,
    ClusterSubmission,
    driver_properties,
    properties_file,
)
from hmsrepl_airflow.settings import SPARK_CONF, SPARK_CONN_ID, spark_app

#: Exit codes of the applications that retrying cannot fix (bad options, configuration, refused input).
PERMANENT_EXIT_CODES = frozenset({2, 3})


@dataclass(frozen=True)
class AppRun:
    """One run of an application (``repl_sync.py`` unless named): its arguments, its environment (settings
    and secrets: never arguments, which ``ps`` shows to everyone) and where it runs."""

    args: Sequence[str]
    on_spark: bool
    name: str = "hmsrepl-replication"
    application: str = "repl_sync.py"
    spark_conn_id: str = SPARK_CONN_ID
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def error_line(lines: Iterable[str]) -> str | None:
    """The application's own one-line error (``Error: ...``), the last one if it printed several."""
    found = None
    for line in lines:
        match = re.search(r"\bError: (.+)$", line.strip())
        if match:
            found = match.group(1).strip()
    return found


def failure(exit_code: int, lines: Iterable[str], how: str) -> Exception:
    """The Airflow exception for a failed run: no retries when retrying cannot fix it."""
    message = error_line(lines) or f"{how} exited with code {exit_code}; see the task log above"
    if exit_code in PERMANENT_EXIT_CODES:
        return AirflowFailException(message)
    return AirflowException(message)


class TaskLog(Protocol):
    """What the launcher writes to: a task's logger (Airflow's own type is private to its SDK)."""

    def info(self, msg: Any, /, *args: Any) -> Any: ...


def run_app(run: AppRun, log: TaskLog) -> None:
    """Run the application; raise ``AirflowFailException`` (no retry) or ``AirflowException`` (retry)."""
    if run.on_spark:
        _spark_submit(run, log)
    else:
        _python(run, log)


def _spark_submit(run: AppRun, log: TaskLog) -> None:
    hook = _submit_hook(run)
    submission = ClusterSubmission(hook._connection["master"], hook._connection["deploy_mode"])
    properties: dict[str, str] = {}
    if submission.is_cluster:  # the driver starts elsewhere: its settings go through the cluster manager
        try:
            properties = driver_properties(submission, run.env)
        except ClusterModeError as exc:
            raise AirflowFailException(str(exc)) from exc
    try:
        if properties:
            with properties_file(properties) as path:
                log.info("cluster deploy mode: the driver's settings go in %s", path)
                hook = _submit_hook(run, extra_properties_file=path)
                hook.submit(spark_app(run.application), env=dict(run.env))
        else:  # client mode: the driver is spark-submit's child and inherits this environment
            hook.submit(spark_app(run.application), env=dict(run.env))
    except AirflowException as exc:
        process = getattr(hook, "_submit_sp", None)
        code = process.returncode if process is not None and process.returncode is not None else 1
        raise failure(code, getattr(hook, "_last_submit_log_lines", []), "spark-submit") from exc


def _submit_hook(run: AppRun, extra_properties_file: str | None = None) -> Any:
    """Airflow's SparkSubmitHook for ``run``, with spark-submit's ``--extra-properties-file`` when given."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class _LayeredPropertiesSubmitHook(SparkSubmitHook):
        def _build_spark_submit_command(self, application: str) -> list[str]:
            command: list[str] = super()._build_spark_submit_command(application)
            if extra_properties_file:
                command[1:1] = ["--extra-properties-file", extra_properties_file]
            return command

    return _LayeredPropertiesSubmitHook(
        conf=SPARK_CONF, conn_id=run.spark_conn_id, name=run.name, application_args=list(run.args)
    )


def _python(run: AppRun, log: TaskLog) -> None:
    """The application as a child Python process, its output streamed into the task log."""
    command = [sys.executable, spark_app(run.application), *run.args, "--master", _spark_master(run)]
    log.info("running without spark-submit (small work): %s", " ".join(command[1:]))
    tail: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(run.env)
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            log.info("%s", line.rstrip())
            tail = [*tail[-199:], line]
        code = process.wait()
    if code != 0:
        raise failure(code, tail, run.application)


def _spark_master(run: AppRun) -> str:
    """The master of the Spark connection, for a session the application may start itself."""
    from airflow.sdk import BaseHook

    try:
        connection = BaseHook.get_connection(run.spark_conn_id)
    except Exception:  # no connection: the provider's own default
        return "yarn"
    host = (connection.host or "yarn").strip()
    if connection.port and "://" in host:
        host = f"{host}:{connection.port}"
    return host
