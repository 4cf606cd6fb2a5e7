"""Floods against a real ``hmsrepl metastore serve``: a legitimate client stays fast while hundreds of idle,
silent, trickling and reconnecting connections are held (with and without Kerberos); admin principals keep
their reserved connections; and eight clients sending 99 MB requests at once stay within the memory budget."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.thrift.auth import client_credentials, connect
from tests.security.flood import Flood, percentile
from tests.security.kdc import REALM, SERVICE_PRINCIPAL, Kdc, kerberos_settings
from tests.security.serving import ServerProcess, call_header, hms, read_reply, serve, string_field

MB = 1024 * 1024
#: Below the 500 connections the floods hold, so the server must displace some of them for the client.
FLOOD_SETTINGS = {"HMSREPL_THRIFT_MAX_CONNECTIONS": "300", "HMSREPL_THRIFT_HANDSHAKE_SECONDS": "2"}


def peak_rss(server: ServerProcess) -> int:
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def latencies(call: Callable[[], Any], connect_again: Callable[[], Any], seconds: float) -> list[float]:
    """Call for ``seconds``: a few calls per connection, then a new connection (its time counts)."""
    samples: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        client = connect_again()
        try:
            for index in range(5):
                call_started = started if index == 0 else time.monotonic()
                call(client)
                samples.append(time.monotonic() - call_started)
                time.sleep(0.02)
        finally:
            client.close()
    return samples


def floods(port: int, handshake: bytes) -> list[Flood]:
    """250 idle connections that reconnect when closed, 250 that trickle the start of a request."""
    return [
        Flood(port, "127.0.0.2", 250, reconnect=True),
        Flood(port, "127.0.0.3", 250, reconnect=True, trickle=handshake, interval=0.5),
    ]


def assert_fast_under_floods(server_port: int, connect_client: Callable[[], Any], handshake: bytes) -> None:
    all_floods = floods(server_port, handshake)
    for flood in all_floods:
        flood.__enter__()
    try:
        time.sleep(2.0)  # the floods are in place, and the first idle ones already timed out and came back
        samples = latencies(lambda c: c.get_all_databases(), connect_client, seconds=6)
    finally:
        for flood in all_floods:
            flood.__exit__()
    held = sum(f.opened - f.closed_by_server for f in all_floods)
    assert sum(f.opened for f in all_floods) >= 500
    assert held >= 200, "the floods held hundreds of connections while the client was measured"
    assert sum(f.closed_by_server for f in all_floods) > 0, "idle connections were displaced or timed out"
    print(
        f"client p50 {percentile(samples, 0.5) * 1000:.1f} ms, p99 {percentile(samples, 0.99) * 1000:.1f} ms "
        f"over {len(samples)} calls; floods opened {sum(f.opened for f in all_floods)} connections"
    )
    assert len(samples) >= 50
    assert percentile(samples, 0.99) < 1.0, f"p99 {percentile(samples, 0.99):.3f} s over {len(samples)} calls"


def test_a_client_stays_fast_while_floods_hold_500_connections(tmp_path: Path) -> None:
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **FLOOD_SETTINGS) as server:
        trickle = call_header("get_database") + string_field(1, b"default") + b"\x00"
        assert_fast_under_floods(server.port, lambda: server.client(timeout_ms=10_000), trickle)
        log = server.log()
        assert "closed idle to make room" in log or "no call within the handshake deadline" in log


def test_a_kerberos_client_stays_fast_while_floods_never_start_sasl(kdc: Kdc, tmp_path: Path) -> None:
    settings = {**kerberos_settings(kdc), **FLOOD_SETTINGS}
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **settings) as server:
        creds = client_credentials(f"alice@{REALM}", str(kdc.keytabs["alice"]), f"FILE:{kdc.root}/cc-alice")  # type: ignore[attr-defined]

        def kerberos_client() -> Any:
            return connect("127.0.0.1", server.port, kerberos_principal=SERVICE_PRINCIPAL, credentials=creds)

        start = struct.pack(">BI", 1, 6) + b"GSSAPI"  # SASL START, then nothing more (trickled)
        assert_fast_under_floods(server.port, kerberos_client, start)


def test_admin_principals_keep_their_reserved_connections(kdc: Kdc, tmp_path: Path) -> None:
    settings = {
        **kerberos_settings(kdc),
        "HMSREPL_THRIFT_MAX_CONNECTIONS": "40",
        "HMSREPL_THRIFT_ADMIN_RESERVED_CONNECTIONS": "10",
        "HMSREPL_THRIFT_HANDSHAKE_SECONDS": "0.5",  # idle this long, a connection of one's own address is stale
    }
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **settings) as server:
        admin = client_credentials(f"hive@{REALM}", str(kdc.keytabs["hive"]), f"FILE:{kdc.root}/cc-hive")  # type: ignore[attr-defined]
        user = client_credentials(f"alice@{REALM}", str(kdc.keytabs["alice"]), f"FILE:{kdc.root}/cc-alice")  # type: ignore[attr-defined]
        admins = [
            connect("127.0.0.1", server.port, kerberos_principal=SERVICE_PRINCIPAL, credentials=admin)
            for _ in range(8)
        ]
        users = []
        try:
            for client in admins:
                client.get_current_notificationEventId()
            # 60 authenticated non-admin connections: more than the 30 others may hold; each displaces the
            # longest-idle other (stale by now), never an admin's.
            time.sleep(0.6)
            for _ in range(60):
                users.append(
                    connect("127.0.0.1", server.port, kerberos_principal=SERVICE_PRINCIPAL, credentials=user)
                )
                users[-1].get_all_databases()
                time.sleep(0.02)
            with Flood(server.port, "127.0.0.2", 100, reconnect=True):
                time.sleep(1.0)
                for client in admins:  # every admin connection is still open and served first
                    started = time.monotonic()
                    client.get_current_notificationEventId()
                    assert time.monotonic() - started < 1.0
        finally:
            for client in admins + users:
                client.close()


def _names_request(total_bytes: int) -> bytes:
    """``get_partitions_by_names`` of about ``total_bytes``: 100-byte names of a table that does not exist."""
    name = b"n" * 100
    count = total_bytes // (4 + len(name))
    return (
        call_header("get_partitions_by_names")
        + string_field(1, b"default")
        + string_field(2, b"missing")
        + struct.pack("!bhbi", 15, 3, 11, count)
        + (struct.pack("!i", len(name)) + name) * count
        + b"\x00"
    )


def test_eight_99mb_requests_stay_within_the_memory_budget(tmp_path: Path) -> None:
    budget = 1024 * MB  # the default
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db") as server:
        request = _names_request(99 * MB)
        replies: list[bytes] = []

        def send() -> None:
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                with contextlib.suppress(
                    OSError
                ):  # refused and closed before all was sent: the reply says why
                    sock.sendall(request)
                    sock.shutdown(socket.SHUT_WR)
                replies.append(read_reply(sock, timeout=60))

        senders = [threading.Thread(target=send) for _ in range(8)]
        started = time.monotonic()
        for sender in senders:
            sender.start()
        time.sleep(0.5)
        probe = server.client(timeout_ms=20_000)  # another client is served meanwhile
        try:
            assert "default" in probe.get_all_databases()
        finally:
            probe.close()
        for sender in senders:
            sender.join(90)
        elapsed = time.monotonic() - started
        peak = peak_rss(server)
    assert len(replies) == 8
    served = [r for r in replies if b"missing" in r or b"NoSuchObject" in r or b"not found" in r.lower()]
    refused = [r for r in replies if b"HMSREPL_THRIFT_MEMORY_BUDGET_BYTES" in r and b"retry later" in r]
    assert served, "requests that fit the budget are served"
    assert len(served) + len(refused) == 8, [r[:200] for r in replies]
    print(
        f"8 x 99 MB: {len(served)} served, {len(refused)} refused, peak RSS {peak / MB:.0f} MB in {elapsed:.1f} s"
    )
    assert peak < budget, f"peak RSS {peak / MB:.0f} MB"
    assert elapsed < 60


def test_a_request_beyond_the_budget_is_refused_with_a_metaexception(tmp_path: Path) -> None:
    settings = {"HMSREPL_THRIFT_MEMORY_BUDGET_BYTES": str(64 * MB)}
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db", **settings) as server:
        client = server.client()
        try:
            with pytest.raises(hms.MetaException) as refused:
                client.get_partitions_by_names(
                    "default", "t", ["n" * 100] * 200_000
                )  # ~21 MB, ~70 MB decoded
        finally:
            client.close()
        assert "memory budget of 67108864 bytes (HMSREPL_THRIFT_MEMORY_BUDGET_BYTES)" in refused.value.message
        assert "retry later" in refused.value.message
        assert "default" in server.client().get_all_databases()  # the server goes on serving
