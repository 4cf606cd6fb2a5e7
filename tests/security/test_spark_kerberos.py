"""A real SparkSession (Spark's bundled Hive 2.3 client) authenticates with a keytab to a Kerberos-enabled
metastore and runs a create / insert / select workload through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from tests.security.kdc import REALM, SERVICE_PRINCIPAL, Kdc
from tests.servers import REPO, RunningMetastore

pytestmark = pytest.mark.spark
JOB = Path(__file__).with_name("spark_kerberos_job.py")


def test_spark_authenticates_with_a_keytab_and_runs_a_workload(
    kdc: Kdc, kerberos_metastore: RunningMetastore
) -> None:
    keytab = kdc.keytabs["alice"]  # type: ignore[attr-defined]
    result = subprocess.run(
        [
            sys.executable,
            str(JOB),
            kerberos_metastore.uri,
            kerberos_metastore.warehouse,
            SERVICE_PRINCIPAL,
            f"alice@{REALM}",
            str(keytab),
            kdc.env["KRB5_CONFIG"],
        ],
        env={**os.environ, **kdc.env, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), str(REPO)])},
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["ugi"] == f"alice@{REALM} (auth:KERBEROS)"
    assert report["rows"] == [[1, "a", "d1"], [2, "b", "d1"], [3, "c", "d2"]]
    # The metastore served the JVM as the principal it authenticated, and recorded the workload's events.
    assert f"authenticated as alice@{REALM}" in kerberos_metastore.log_path.read_text()
    store = Metastore(kerberos_metastore.config)
    try:
        events = store.get_next_notification(0, db_name=report["db"])
    finally:
        store.close()
    kinds = [e.event_type for e in events]
    assert kinds[:2] == ["CREATE_DATABASE", "CREATE_TABLE"] and kinds.count("ADD_PARTITION") == 2
