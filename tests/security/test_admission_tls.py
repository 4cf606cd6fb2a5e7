"""The admission floods of ``test_admission`` over TLS: idle connections that never send a ClientHello and
connections that trickle one byte by byte hold a socket each, never a worker, while a legitimate TLS client
(verifying the server against its CA) stays fast."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

from hmsrepl.thrift.auth import connect
from tests.security.serving import serve
from tests.security.test_admission import FLOOD_SETTINGS, assert_fast_under_floods
from tests.security.tls import make_ca_and_server_cert


def client_hello(ca: Path) -> bytes:
    """The first bytes a real TLS client sends (its ClientHello), for the flood to trickle."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    context = ssl.create_default_context(cafile=str(ca))
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with contextlib.suppress(ssl.SSLWantReadError):  # waiting for the server's answer: the hello is written
        tls.do_handshake()
    hello = outgoing.read()
    assert hello[:1] == b"\x16", "a TLS handshake record"
    return hello


def test_a_tls_client_stays_fast_while_floods_hold_500_connections(tmp_path: Path) -> None:
    certs = make_ca_and_server_cert(tmp_path / "tls")
    settings = {
        **FLOOD_SETTINGS,
        "HMSREPL_THRIFT_TLS_CERT": str(certs["cert"]),
        "HMSREPL_THRIFT_TLS_KEY": str(certs["key"]),
    }
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **settings) as server:
        assert_fast_under_floods(
            server.port,
            lambda: connect("127.0.0.1", server.port, tls_ca=str(certs["ca"]), timeout_ms=10_000),
            client_hello(certs["ca"]),
        )
        log = server.log()
        assert "closed idle to make room" in log or "no call within the handshake deadline" in log
        assert "Traceback" not in log
