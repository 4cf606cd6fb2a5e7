"""Ask Airflow itself what it makes of docker-compose.yaml's Airflow settings (run in a subprocess).

    python -m tests.compose_probe < request.json > answer.json

The request holds the environment of the compose file's Airflow services (defaults filled in, the DAG
folder pointed at this checkout) and the Airflow commands they run. The answer says, in Airflow's own
words: whether each command parses, the DAGs found and their import errors, every connection id the
tasks name with what Airflow builds from its AIRFLOW_CONN_* variable, and the master SparkSubmitHook
resolves. A subprocess, because Airflow reads its configuration once per process, at import.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from typing import Any


def _task_conn_ids(dag: Any) -> set[str]:
    """Every ``*conn_id`` attribute of every task (operators keep their hooks' connection ids)."""
    found: set[str] = set()
    for task in dag.tasks:
        for name, value in vars(task).items():
            if name.lstrip("_").endswith("conn_id") and isinstance(value, str) and value:
                found.add(value)
    return found


def probe(request: dict[str, Any]) -> dict[str, Any]:
    """Parse commands, load the DAGs, resolve connections; never raises for what it inspects."""
    os.environ.update(request["env"])
    from airflow.cli.cli_parser import get_parser
    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import BaseHook

    answer: dict[str, Any] = {"commands": {}, "connections": {}}
    for command in request["commands"]:
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                get_parser().parse_args(command[1:])
            answer["commands"][" ".join(command)] = "ok"
        except SystemExit:
            answer["commands"][" ".join(command)] = stderr.getvalue().strip() or "rejected"

    bag = DagBag(dag_folder=request["env"]["AIRFLOW__CORE__DAGS_FOLDER"])
    answer["dag_ids"] = sorted(bag.dag_ids)
    answer["import_errors"] = {str(k): str(v) for k, v in bag.import_errors.items()}
    conn_ids = {"spark_default"}
    for dag in bag.dags.values():
        conn_ids |= _task_conn_ids(dag)
    for conn_id in sorted(conn_ids):
        try:
            conn = BaseHook.get_connection(conn_id)
            answer["connections"][conn_id] = {
                "conn_type": conn.conn_type,
                "host": conn.host,
                "port": conn.port,
                "login": conn.login,
            }
        except Exception as exc:  # the answer reports it; the test names the missing variable
            answer["connections"][conn_id] = {"error": f"{type(exc).__name__}: {exc}"}
    answer["spark_master"] = SparkSubmitHook(conn_id="spark_default")._resolve_connection()["master"]
    return answer


if __name__ == "__main__":
    result = probe(json.load(sys.stdin))
    sys.stdout.write("\n" + json.dumps(result) + "\n")
