"""A real SparkSession (Spark's bundled Hive 2.3 client) on a secured metastore: authenticating with a keytab
to a Kerberos-enabled one, and over TLS with a truststore; each runs a create / insert / select workload.

Spark's Hive 2.3 client does not combine the two (with SASL on it opens a plain socket), so they are
separate servers here; Python clients use both at once (test_tls.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from tests.security.kdc import REALM, SERVICE_PRINCIPAL, Kdc, kerberos_settings
from tests.security.tls import make_ca_and_server_cert
from tests.servers import REPO, RunningMetastore, metastore_server

pytestmark = pytest.mark.spark
JOB = Path(__file__).with_name("spark_secured_job.py")
ROWS = [[1, "a", "d1"], [2, "b", "d1"], [3, "c", "d2"]]


def _run_job(
    server: RunningMetastore, conf: dict[str, str], *flags: str, env: dict[str, str]
) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(JOB), server.uri, server.warehouse, json.dumps(conf), *flags],
        env={**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), str(REPO)])},
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _event_kinds(server: RunningMetastore, db: str) -> list[str]:
    store = Metastore(server.config)
    try:
        return [e.event_type for e in store.get_next_notification(0, db_name=db)]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("server_qop", "rpc_protection"), [("auth", "authentication"), ("auth-conf", "privacy")]
)
def test_spark_authenticates_with_a_keytab_and_runs_a_workload(
    kdc: Kdc, tmp_path: Path, server_qop: str, rpc_protection: str
) -> None:
    """QOP auth is Hive's default; auth-conf (Hadoop's ``privacy``) encrypts, which Spark's Hive 2.3 client
    cannot get from TLS while it uses SASL."""
    settings = {**kerberos_settings(kdc), "HMSREPL_THRIFT_SASL_QOP": server_qop}
    with metastore_server(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **settings) as server:
        _kerberos_workload(kdc, server, rpc_protection)
        assert f"authenticated as alice@{REALM} (QOP {server_qop})" in server.log_path.read_text()


def _kerberos_workload(kdc: Kdc, kerberos_metastore: RunningMetastore, rpc_protection: str) -> None:
    java_opts = f"-Djava.security.krb5.conf={kdc.env['KRB5_CONFIG']}"
    conf = {
        "spark.hadoop.hadoop.rpc.protection": rpc_protection,
        "spark.hadoop.hive.metastore.sasl.enabled": "true",
        "spark.hadoop.hive.metastore.kerberos.principal": SERVICE_PRINCIPAL,
        "spark.hadoop.hadoop.security.authentication": "kerberos",
        "spark.kerberos.principal": f"alice@{REALM}",
        "spark.kerberos.keytab": str(kdc.keytabs["alice"]),  # type: ignore[attr-defined]
        # Reading a Hive table through Hadoop's InputFormat with security on asks for delegation tokens and
        # needs a token renewer's name (a cluster's yarn-site.xml sets it); local files issue no tokens.
        "spark.hadoop.yarn.resourcemanager.principal": f"yarn/_HOST@{REALM}",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
    }
    report = _run_job(kerberos_metastore, conf, "--kerberos", env=kdc.env)
    assert report["ugi"] == f"alice@{REALM} (auth:KERBEROS)"
    assert report["rows"] == ROWS
    # The metastore served the JVM as the principal it authenticated, and recorded the workload's events.
    assert f"authenticated as alice@{REALM}" in kerberos_metastore.log_path.read_text()
    kinds = _event_kinds(kerberos_metastore, report["db"])
    assert kinds[:2] == ["CREATE_DATABASE", "CREATE_TABLE"] and kinds.count("ADD_PARTITION") == 2


def test_spark_connects_over_tls_with_a_truststore(tmp_path: Path) -> None:
    certs = make_ca_and_server_cert(tmp_path / "tls")
    truststore = tmp_path / "truststore.jks"
    subprocess.run(
        ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(certs["ca"]),
         "-keystore", str(truststore), "-storepass", "changeit"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    tls = {"HMSREPL_THRIFT_TLS_CERT": str(certs["cert"]), "HMSREPL_THRIFT_TLS_KEY": str(certs["key"])}
    with metastore_server(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **tls) as server:
        conf = {
            "spark.hadoop.hive.metastore.use.SSL": "true",
            "spark.hadoop.hive.metastore.truststore.path": str(truststore),
            "spark.hadoop.hive.metastore.truststore.password": "changeit",
        }
        report = _run_job(server, conf, env={})
        assert report["rows"] == ROWS
        kinds = _event_kinds(server, report["db"])
        assert kinds[:2] == ["CREATE_DATABASE", "CREATE_TABLE"] and kinds.count("ADD_PARTITION") == 2
