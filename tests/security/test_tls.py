"""TLS on the Thrift port (Hive's hive.metastore.use.SSL): clients verify the server against their CA;
plaintext clients and clients that do not trust the certificate get nothing, and the server keeps serving."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from thriftpy2.protocol.cybin import ProtocolError
from thriftpy2.rpc import make_client
from thriftpy2.transport import TTransportException

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.thrift.auth import SecuritySettingError, ThriftSecurity, client_credentials, connect
from hmsrepl.thrift.idl import Service, hms
from tests.security.kdc import REALM, SERVICE_PRINCIPAL, Kdc, kerberos_settings
from tests.security.tls import make_ca_and_server_cert
from tests.servers import RunningMetastore, metastore_server


@pytest.fixture
def certs(tmp_path: Path) -> dict[str, Path]:
    return make_ca_and_server_cert(tmp_path / "tls")


def _tls_settings(certs: dict[str, Path]) -> dict[str, str]:
    return {"HMSREPL_THRIFT_TLS_CERT": str(certs["cert"]), "HMSREPL_THRIFT_TLS_KEY": str(certs["key"])}


@pytest.fixture
def tls_metastore(tmp_path: Path, certs: dict[str, Path]) -> Iterator[RunningMetastore]:
    with metastore_server(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **_tls_settings(certs)) as server:
        yield server


def _databases(server: RunningMetastore) -> list[str]:
    store = Metastore(server.config)
    try:
        return store.catalog.get_databases("*")
    finally:
        store.close()


def test_a_client_trusting_the_ca_is_served(tls_metastore: RunningMetastore, certs: dict[str, Path]) -> None:
    client = connect("127.0.0.1", tls_metastore.port, tls_ca=str(certs["ca"]))
    try:
        client.create_database(hms.Database(name="over_tls", parameters={}))
        assert "over_tls" in client.get_all_databases()
    finally:
        client.close()


def test_plaintext_and_untrusting_clients_are_refused(
    tls_metastore: RunningMetastore, certs: dict[str, Path], tmp_path: Path
) -> None:
    before = _databases(tls_metastore)
    plain = make_client(Service, "127.0.0.1", tls_metastore.port, timeout=10_000)
    try:
        # The server's TLS handshake fails on the plain bytes; it drops the connection (reset or an alert).
        with pytest.raises((TTransportException, ProtocolError, ConnectionError)):
            plain.create_database(hms.Database(name="plaintext", parameters={}))
    finally:
        plain.close()
    other_ca = make_ca_and_server_cert(tmp_path / "other", ca_name="someone else's CA")["ca"]
    with pytest.raises(ssl.SSLCertVerificationError):
        connect("127.0.0.1", tls_metastore.port, tls_ca=str(other_ca))
    assert _databases(tls_metastore) == before
    client = connect("127.0.0.1", tls_metastore.port, tls_ca=str(certs["ca"]))
    try:
        assert client.get_all_databases() == before
    finally:
        client.close()
    log = tls_metastore.log_path.read_text()
    assert "TLS handshake with 127.0.0.1 failed" in log and "Traceback" not in log


def test_tls_and_kerberos_together(kdc: Kdc, tmp_path: Path, certs: dict[str, Path]) -> None:
    settings = {**kerberos_settings(kdc), **_tls_settings(certs)}
    with metastore_server(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **settings) as server:
        keytab = str(kdc.keytabs["hive"])  # type: ignore[attr-defined]
        creds = client_credentials(f"hive@{REALM}", keytab, f"FILE:{tmp_path}/cc-hive")
        client = connect(
            "127.0.0.1",
            server.port,
            tls_ca=str(certs["ca"]),
            kerberos_principal=SERVICE_PRINCIPAL,
            credentials=creds,
        )
        try:
            assert client.get_current_notificationEventId().eventId >= 0
        finally:
            client.close()
        # TLS first: a SASL client without TLS does not get to negotiate.
        with pytest.raises((ConnectionError, TTransportException)):
            connect(
                "127.0.0.1",
                server.port,
                kerberos_principal=SERVICE_PRINCIPAL,
                credentials=creds,
                timeout_ms=10_000,
            )


def test_tls_settings_are_checked_at_start_up(certs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(SecuritySettingError, match="needs both"):
        ThriftSecurity(MetastoreConfig(thrift_tls_cert=str(certs["cert"])))
    with pytest.raises(SecuritySettingError, match="cannot load the TLS certificate"):
        ThriftSecurity(MetastoreConfig(thrift_tls_cert=str(certs["ca"]), thrift_tls_key=str(certs["key"])))
