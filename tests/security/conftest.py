"""Fixtures of the security tests: a real MIT KDC on loopback, principals with keytabs, and
Kerberos-enabled metastore server processes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.kdc import SERVICE_PRINCIPAL, Kdc, kdc_tools_missing, running_kdc
from tests.servers import RunningMetastore, metastore_server

#: Client principals: "hive" is an admin user (HMSREPL_ADMIN_USERS default), "alice" is not, "svc" is a
#: proxy user allowed to act as alice from loopback.
CLIENTS = ("hive", "alice", "svc")
PROXY_USERS = {"svc": {"users": ["alice"], "hosts": ["127.0.0.1"]}}


@pytest.fixture(scope="session")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    missing = kdc_tools_missing()
    if missing:
        pytest.fail(missing)  # the Makefile installs them: a missing KDC is a broken setup, not a skip
    root = tmp_path_factory.mktemp("kdc")
    saved = {key: os.environ.get(key) for key in ("KRB5_CONFIG", "KRB5_KDC_PROFILE", "KRB5CCNAME")}
    with running_kdc(root) as server:
        os.environ.update(server.env)  # this process's GSSAPI clients find the realm through these
        server.service_keytab = server.add_principal(SERVICE_PRINCIPAL)  # type: ignore[attr-defined]
        server.keytabs = {name: server.add_principal(name) for name in CLIENTS}  # type: ignore[attr-defined]
        try:
            yield server
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def kerberos_settings(kdc: Kdc) -> dict[str, str]:
    return {
        **kdc.env,
        "HMSREPL_THRIFT_AUTH": "kerberos",
        "HMSREPL_KERBEROS_PRINCIPAL": SERVICE_PRINCIPAL,
        "HMSREPL_KERBEROS_KEYTAB": str(kdc.service_keytab),  # type: ignore[attr-defined]
        "HMSREPL_PROXY_USERS": json.dumps(PROXY_USERS),
    }


@pytest.fixture
def kerberos_metastore(kdc: Kdc, tmp_path: Path) -> Iterator[RunningMetastore]:
    """``hmsrepl metastore serve`` with HMSREPL_THRIFT_AUTH=kerberos, on SQLite."""
    with metastore_server(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **kerberos_settings(kdc)) as server:
        yield server
