"""Settings reach a driver that Spark starts in cluster deploy mode, and secrets never reach a command line.

The properties file is read by the real spark-submit (Spark's own Java properties parser and its layering over
spark-defaults.conf); the driver's environment settings are checked as Spark hands them to the cluster manager.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from hmsrepl_airflow.cluster_settings import (
    K8S_SECRET_VARIABLE,
    ClusterModeError,
    ClusterSubmission,
    driver_properties,
    properties_file,
    secret_key,
)
from hmsrepl_airflow.launcher import AppRun, _spark_submit, _submit_hook

PASSWORD = "s3cr:t=#!\\ é"
SETTINGS = {
    "HMSREPL_SOURCE_DB_URL": "postgresql+psycopg://hive:s3cr%3At%3D%23%21%5C%20%C3%A9@db:5432/metastore",
    "HMSREPL_SOURCE_WAREHOUSE": "s3://lake/warehouse",
    "HMSREPL_TARGET_CMROOT": "hdfs://nn:8020/cm root",
    "HMSREPL_SOURCE_IDENTITY": json.dumps({"db": "metastore", "head": 42}),
    "PATH": "/usr/bin",  # not a product setting: stays with the worker
}

YARN = ClusterSubmission("yarn", "cluster")
K8S = ClusterSubmission("k8s://https://kube:6443", "cluster")


def test_yarn_gets_every_setting_in_the_application_masters_environment() -> None:
    properties = driver_properties(YARN, SETTINGS)
    assert {k for k in properties if k.startswith("spark.yarn.appMasterEnv.")} == {
        f"spark.yarn.appMasterEnv.{name}" for name in SETTINGS if name.startswith("HMSREPL_")
    }
    assert properties["spark.yarn.appMasterEnv.HMSREPL_SOURCE_DB_URL"] == SETTINGS["HMSREPL_SOURCE_DB_URL"]
    assert "HMSREPL_[A-Z]+_DB_URL" in properties["spark.redaction.regex"]  # the UI shows it redacted


def test_kubernetes_takes_secrets_from_the_operators_secret_only() -> None:
    with pytest.raises(ClusterModeError, match=f"set {K8S_SECRET_VARIABLE}"):
        driver_properties(K8S, SETTINGS)
    properties = driver_properties(K8S, {**SETTINGS, K8S_SECRET_VARIABLE: "hmsrepl-metastores"})
    assert properties["spark.kubernetes.driver.secretKeyRef.HMSREPL_SOURCE_DB_URL"] == (
        f"hmsrepl-metastores:{secret_key('HMSREPL_SOURCE_DB_URL')}"
    )
    assert properties["spark.kubernetes.driverEnv.HMSREPL_SOURCE_WAREHOUSE"] == "s3://lake/warehouse"
    assert not any("s3cr" in value for value in properties.values())


def test_a_master_without_a_driver_environment_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CLUSTER_TEST",
        json.dumps(
            {
                "conn_type": "spark",
                "host": "spark://master",
                "port": 7077,
                "extra": {"deploy-mode": "cluster"},
            }
        ),
    )
    run = AppRun(args=["--help"], on_spark=True, spark_conn_id="spark_cluster_test", env=SETTINGS)
    import logging

    with pytest.raises(AirflowFailException, match="set the Spark connection's deploy-mode to client"):
        _spark_submit(run, logging.getLogger("test"))


@pytest.mark.spark
def test_spark_submit_reads_the_private_file_layered_over_spark_defaults(tmp_path: Path) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.hmsrepl.test.fromdefaults  kept\n")
    app = tmp_path / "show_conf.py"
    app.write_text(
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "print('CONF=' + json.dumps(dict(spark.sparkContext.getConf().getAll())))\n"
        "spark.stop()\n"
    )
    properties = driver_properties(YARN, SETTINGS)
    run = AppRun(args=[], on_spark=True, env=SETTINGS)
    with properties_file(properties) as path:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # only the task's user reads it
        command = _submit_hook(run, extra_properties_file=path)._build_spark_submit_command(str(app))
        assert command[1:3] == ["--extra-properties-file", path]
        assert not any(PASSWORD in part or "s3cr" in part for part in command)  # nothing secret in argv
        spark_submit = Path(sys.executable).parent / "spark-submit"
        done = subprocess.run(
            [str(spark_submit), "--master", "local[1]", "--extra-properties-file", path, str(app)],
            env={
                **os.environ,
                "SPARK_CONF_DIR": str(conf_dir),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable,
            },
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert not Path(path).exists()
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("CONF="))[5:])
    for name, value in SETTINGS.items():
        if name.startswith("HMSREPL_"):
            assert seen[f"spark.yarn.appMasterEnv.{name}"] == value  # byte for byte through Java's parser
    assert seen["spark.hmsrepl.test.fromdefaults"] == "kept"  # spark-defaults.conf still applies
