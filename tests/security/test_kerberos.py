"""Kerberos (SASL GSSAPI) on the Thrift port, against a real MIT KDC and a real metastore server process.

Identity comes from the authenticated principal: clients without SASL or without valid Kerberos credentials
are refused before their first call (and change nothing), the server keeps serving others, and ``set_ugi``
cannot buy a non-admin principal the notification log.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from thriftpy2.protocol.cybin import ProtocolError
from thriftpy2.rpc import make_client
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TSocket, TTransportException

from hmsrepl.metastore import Metastore
from hmsrepl.thrift import sasl
from hmsrepl.thrift.auth import GssapiClient, SecuritySettingError, client_credentials, connect
from hmsrepl.thrift.idl import Service, hms
from tests.security.kdc import REALM, SERVICE_PRINCIPAL, Kdc
from tests.servers import RunningMetastore

#: The notification calls declare no exceptions: a refusal arrives as a TApplicationException with the message.
DENIED = (hms.MetaException, TApplicationException)


@contextmanager
def kerberos_client(kdc: Kdc, server: RunningMetastore, user: str) -> Iterator[Any]:
    """A client authenticated as ``user@REALM`` from its keytab (a kinit into a private ticket cache)."""
    creds = client_credentials(f"{user}@{REALM}", str(kdc.keytabs[user]), f"FILE:{kdc.root}/cc-{user}")  # type: ignore[attr-defined]
    client = connect("127.0.0.1", server.port, kerberos_principal=SERVICE_PRINCIPAL, credentials=creds)
    try:
        yield client
    finally:
        client.close()


def _events_request() -> Any:
    return hms.NotificationEventRequest(lastEvent=0, maxEvents=10)


def _state(server: RunningMetastore) -> tuple[list[str], int]:
    """What an attack must not change: the databases and the notification log's head."""
    store = Metastore(server.config)
    try:
        return store.catalog.get_databases("*"), store.get_current_notification_event_id()
    finally:
        store.close()


def test_a_principal_with_a_ticket_is_served_as_itself(
    kdc: Kdc, kerberos_metastore: RunningMetastore
) -> None:
    with kerberos_client(kdc, kerberos_metastore, "alice") as client:
        client.create_database(hms.Database(name="alices", parameters={}))
        assert "alices" in client.get_all_databases()
        # The connection is alice's: the notification API refuses her by name, whatever she claims later.
        with pytest.raises(DENIED, match="user 'alice' may not"):
            client.get_next_notification(_events_request())
    with kerberos_client(kdc, kerberos_metastore, "hive") as client:
        events = client.get_next_notification(_events_request()).events
        assert [e.eventType for e in events][-1:] == ["CREATE_DATABASE"]


def test_set_ugi_cannot_widen_a_non_admin_principal(kdc: Kdc, kerberos_metastore: RunningMetastore) -> None:
    before = _state(kerberos_metastore)
    with kerberos_client(kdc, kerberos_metastore, "alice") as client:
        with pytest.raises(hms.MetaException, match=r"may not act as 'hive'.*HMSREPL_PROXY_USERS"):
            client.set_ugi("hive", [])
        with pytest.raises(DENIED, match="user 'alice' may not"):
            client.get_next_notification(_events_request())
        with pytest.raises(DENIED, match="user 'alice' may not"):
            client.get_current_notificationEventId()
        assert client.set_ugi("alice", []) == []  # naming herself is fine
    assert _state(kerberos_metastore) == before


def test_proxy_users_may_act_only_as_whom_they_are_allowed(
    kdc: Kdc, kerberos_metastore: RunningMetastore
) -> None:
    with kerberos_client(kdc, kerberos_metastore, "svc") as client:
        client.set_ugi("alice", [])  # HMSREPL_PROXY_USERS: svc may act as alice and hive from 127.0.0.1
        with pytest.raises(hms.MetaException, match="may not act as 'root'"):
            client.set_ugi("root", [])
        with pytest.raises(DENIED, match="user 'svc' may not"):
            client.get_next_notification(_events_request())
        # Acting as an admin user does not make the proxy one: the check is on the authenticated 'svc'.
        client.set_ugi("hive", [])
        with pytest.raises(DENIED, match="user 'svc' may not"):
            client.get_next_notification(_events_request())


def test_an_admin_principal_narrowed_by_set_ugi_loses_the_notification_api(
    kdc: Kdc, kerberos_metastore: RunningMetastore
) -> None:
    with kerberos_client(kdc, kerberos_metastore, "hive") as client:
        client.get_current_notificationEventId()
        with pytest.raises(hms.MetaException, match="may not act as 'alice'"):
            client.set_ugi("alice", [])  # hive is no proxy user: refused, and still hive
        client.get_current_notificationEventId()


def test_a_client_without_sasl_is_refused_and_others_are_still_served(
    kdc: Kdc, kerberos_metastore: RunningMetastore
) -> None:
    before = _state(kerberos_metastore)
    plain = make_client(Service, "127.0.0.1", kerberos_metastore.port, timeout=10_000)
    try:
        # The server answers with a SASL ERROR frame and closes: not a Thrift reply to a plain client.
        with pytest.raises((TTransportException, ProtocolError)):
            plain.create_database(hms.Database(name="mallorys", parameters={}))
    finally:
        plain.close()
    # A client that connects and says nothing holds no call slot others need.
    idle = socket.create_connection(("127.0.0.1", kerberos_metastore.port))
    try:
        started = time.monotonic()
        with kerberos_client(kdc, kerberos_metastore, "hive") as client:
            client.get_current_notificationEventId()
        assert time.monotonic() - started < 10
    finally:
        idle.close()
    assert _state(kerberos_metastore) == before
    assert "refused a connection" in kerberos_metastore.log_path.read_text()


def _raw_sasl(port: int, *messages: tuple[int, bytes]) -> tuple[int, bytes]:
    """Send negotiation messages on a fresh connection; return the server's first answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for status, payload in messages:
            sock.sendall(struct.pack(">BI", status, len(payload)) + payload)
        header = _recv_exact(sock, 5)
        status, length = struct.unpack(">BI", header)
        return status, _recv_exact(sock, length)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def test_forged_tokens_and_other_mechanisms_are_refused(
    kdc: Kdc, kerberos_metastore: RunningMetastore
) -> None:
    before = _state(kerberos_metastore)
    status, message = _raw_sasl(kerberos_metastore.port, (sasl.START, b"PLAIN"), (sasl.OK, b"\0hive\0hive"))
    assert status == sasl.BAD and b"unsupported SASL mechanism 'PLAIN'" in message
    status, message = _raw_sasl(
        kerberos_metastore.port, (sasl.START, b"GSSAPI"), (sasl.OK, b"\x60" + b"A" * 64)
    )
    assert status == sasl.BAD and b"Kerberos authentication failed" in message
    status, message = _raw_sasl(kerberos_metastore.port, (sasl.OK, b""))
    assert status == sasl.ERROR and b"expected a SASL START" in message
    with kerberos_client(kdc, kerberos_metastore, "hive") as client:
        client.get_current_notificationEventId()
    assert _state(kerberos_metastore) == before


def test_a_client_without_a_ticket_cannot_authenticate(
    kdc: Kdc, kerberos_metastore: RunningMetastore
) -> None:
    import gssapi.exceptions

    empty = f"FILE:{kdc.root}/cc-nobody"
    with pytest.raises(gssapi.exceptions.GSSError):
        connect(
            "127.0.0.1",
            kerberos_metastore.port,
            kerberos_principal=SERVICE_PRINCIPAL,
            credentials=client_credentials(ccache=empty),
        )


def test_kerberos_settings_are_checked_at_start_up(kdc: Kdc, tmp_path: Path) -> None:
    from hmsrepl.config import MetastoreConfig
    from hmsrepl.thrift.auth import ThriftSecurity

    base = {"thrift_auth": "kerberos", "kerberos_keytab": str(kdc.keytabs["alice"])}  # type: ignore[attr-defined]
    with pytest.raises(SecuritySettingError, match="needs HMSREPL_KERBEROS_PRINCIPAL"):
        ThriftSecurity(MetastoreConfig(**base))
    with pytest.raises(
        SecuritySettingError, match=r"cannot use Kerberos principal hive/localhost@HMSREPL\.TEST"
    ):
        ThriftSecurity(MetastoreConfig(**base, kerberos_principal=SERVICE_PRINCIPAL))
    with pytest.raises(SecuritySettingError, match="unknown keys"):
        ThriftSecurity(MetastoreConfig(proxy_users={"svc": {"user": ["alice"]}}))


def test_oversized_sasl_messages_are_refused_unread(kdc: Kdc, kerberos_metastore: RunningMetastore) -> None:
    # During negotiation: a 2 GB length is refused from the header, before any allocation.
    with socket.create_connection(("127.0.0.1", kerberos_metastore.port), timeout=10) as sock:
        sock.sendall(struct.pack(">BI", sasl.START, 6) + b"GSSAPI" + struct.pack(">BI", sasl.OK, 2**31 - 1))
        status, length = struct.unpack(">BI", _recv_exact(sock, 5))
        assert status == sasl.ERROR and b"larger than" in _recv_exact(sock, length)
    # After authentication: a data frame over the limit closes that connection only.
    creds = client_credentials(f"alice@{REALM}", str(kdc.keytabs["alice"]), f"FILE:{kdc.root}/cc-alice")  # type: ignore[attr-defined]
    sock = TSocket("127.0.0.1", kerberos_metastore.port, socket_timeout=10_000)
    sock.open()
    try:
        sasl.negotiate_client(sock, GssapiClient(SERVICE_PRINCIPAL, creds))
        sock.sock.sendall(struct.pack(">I", 2**31 - 1))
        assert sock.sock.recv(1) == b"", "the server closes a connection that announces an oversized frame"
    finally:
        sock.close()
    with kerberos_client(kdc, kerberos_metastore, "hive") as client:
        client.get_current_notificationEventId()


class _Recording(TSocket):
    """A client socket that keeps every byte it received, to show what crossed the wire."""

    received = b""

    def read(self, sz: int) -> bytes:
        data = super().read(sz)
        self.received += data
        return data


def _call_recorded(port: int, creds: Any, qop: str, db: str) -> tuple[Any, bytes]:
    from thriftpy2.protocol import TCyBinaryProtocolFactory
    from thriftpy2.thrift import TClient
    from thriftpy2.transport import TCyBufferedTransport

    sock = _Recording("127.0.0.1", port, socket_timeout=10_000)
    sock.open()
    mechanism = GssapiClient(SERVICE_PRINCIPAL, creds, qop)
    sasl.negotiate_client(sock, mechanism)
    trans = TCyBufferedTransport(sasl.TSaslTransport(sock, codec=mechanism.frame_codec()))
    client = TClient(Service, TCyBinaryProtocolFactory().get_protocol(trans))
    try:
        sock.received = b""
        return client.get_database(db), sock.received
    finally:
        client.close()


def test_auth_conf_encrypts_every_frame(kdc: Kdc, kerberos_metastore: RunningMetastore) -> None:
    creds = client_credentials(f"hive@{REALM}", str(kdc.keytabs["hive"]), f"FILE:{kdc.root}/cc-hive")  # type: ignore[attr-defined]
    db = "visible_on_the_wire_unless_encrypted"
    with kerberos_client(kdc, kerberos_metastore, "hive") as client:
        client.create_database(hms.Database(name=db, parameters={}))
    plain_reply, plain_bytes = _call_recorded(kerberos_metastore.port, creds, "auth", db)
    signed_reply, signed_bytes = _call_recorded(kerberos_metastore.port, creds, "auth-int", db)
    sealed_reply, sealed_bytes = _call_recorded(kerberos_metastore.port, creds, "auth-conf", db)
    assert plain_reply.name == signed_reply.name == sealed_reply.name == db
    assert db.encode() in plain_bytes and db.encode() in signed_bytes  # auth-int signs, it does not hide
    assert db.encode() not in sealed_bytes
    assert "(QOP auth-conf)" in kerberos_metastore.log_path.read_text()


def test_a_server_requiring_auth_conf_refuses_weaker_layers(kdc: Kdc, tmp_path: Path) -> None:
    from tests.security.kdc import kerberos_settings
    from tests.servers import metastore_server

    settings = {**kerberos_settings(kdc), "HMSREPL_THRIFT_SASL_QOP": "auth-conf"}
    creds = client_credentials(f"hive@{REALM}", str(kdc.keytabs["hive"]), f"FILE:{kdc.root}/cc-hive")  # type: ignore[attr-defined]
    with metastore_server(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **settings) as server:
        with pytest.raises(
            sasl.SaslError, match=r"does not offer SASL QOP 'auth' \(it offers \['auth-conf'\]\)"
        ):
            connect("127.0.0.1", server.port, kerberos_principal=SERVICE_PRINCIPAL, credentials=creds)

        class Insisting(GssapiClient):  # answers 'auth' whatever the offer says
            def evaluate(self, challenge: bytes) -> tuple[bytes, bool]:
                if not self._ctx.complete:
                    return super().evaluate(challenge)
                return self._ctx.wrap(bytes([1, 0, 0, 0]), False).message, True

        sock = TSocket("127.0.0.1", server.port, socket_timeout=10_000)
        sock.open()
        try:
            with pytest.raises(sasl.SaslError, match=r"accepts QOP \['auth-conf'\]"):
                sasl.negotiate_client(sock, Insisting(SERVICE_PRINCIPAL, creds))
        finally:
            sock.close()
        client = connect(
            "127.0.0.1", server.port, kerberos_principal=SERVICE_PRINCIPAL, credentials=creds, qop="auth-conf"
        )
        try:
            assert client.get_current_notificationEventId().eventId >= 0
        finally:
            client.close()
