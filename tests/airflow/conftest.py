"""Airflow for the DAG tests: a private AIRFLOW_HOME with its metadata DB migrated once per session.

Airflow reads its configuration when first imported, so the environment is set here, when pytest collects
this directory and before any test module imports ``airflow``. The metastores are real server processes;
connections are defined the way production defines them, by ``AIRFLOW_CONN_*`` variables.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from tests.servers import REPO, RunningMetastore, metastore_server

AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="hmsrepl-airflow-"))
AIRFLOW_ENV = {
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
    "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
    # A failing task fails the run at once (dag.test() would otherwise wait out retry delays); the DAGs'
    # own retry settings are checked in a clean environment by test_dag_integrity.
    "HMSREPL_TASK_RETRIES": "0",
}
os.environ.update(AIRFLOW_ENV)
# spark-submit (SparkSubmitOperator) and its Python must be the venv's.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# What Airflow does for its plugins folder once it has started; the hook tests import the plugin directly.
sys.path.insert(0, AIRFLOW_ENV["AIRFLOW__CORE__PLUGINS_FOLDER"])


def pytest_sessionfinish(session: pytest.Session) -> None:
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """``airflow db migrate`` once per session (dag.test() records runs in the metadata DB)."""
    airflow = Path(sys.executable).parent / "airflow"
    done = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.fixture(scope="session")
def dagbag(airflow_db: None) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag


def metastore_connection(port: int, user: str = "hive") -> str:
    """An ``AIRFLOW_CONN_*`` value for a metastore's Thrift server."""
    return json.dumps({"conn_type": "generic", "host": "127.0.0.1", "port": port, "login": user})


@pytest.fixture(scope="module")
def target_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMetastore]:
    """The replica side: its own metastore server process on SQLite."""
    root = tmp_path_factory.mktemp("airflow-target")
    with metastore_server(root, f"sqlite:///{root}/metastore.db") as server:
        yield server


@pytest.fixture
def target_store(target_metastore: RunningMetastore) -> Iterator[Metastore]:
    """In-process access to the target server's database, to make changes the server then reports."""
    store = Metastore(target_metastore.config)
    yield store
    store.close()
