"""Fixtures of the security tests: a real MIT KDC on loopback (``tests.security.kdc``), principals with
keytabs, and Kerberos-enabled metastore server processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.kdc import Kdc, kerberos_settings
from tests.servers import RunningMetastore, metastore_server


@pytest.fixture
def kerberos_metastore(kdc: Kdc, tmp_path: Path) -> Iterator[RunningMetastore]:
    """``hmsrepl metastore serve`` with HMSREPL_THRIFT_AUTH=kerberos, on SQLite."""
    with metastore_server(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **kerberos_settings(kdc)) as server:
        yield server
