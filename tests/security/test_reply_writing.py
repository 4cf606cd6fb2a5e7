"""Large replies from a real ``hmsrepl metastore serve``: a partition list longer than a page is read and
written in pages, and a client gets exactly the bytes of the reply built whole; clients that read their
replies slowly (more of them than the server has workers, with and without TLS) hold no worker, so another client is served at
once, and each slow reader still gets its whole reply."""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.utils import serialize

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.partition_pages import PAGE_ROWS
from hmsrepl.thrift import convert
from hmsrepl.thrift.auth import client_credentials, connect
from tests.conftest import make_config
from tests.helpers import make_partition, make_table
from tests.security.kdc import REALM, SERVICE_PRINCIPAL, Kdc, kerberos_settings
from tests.security.serving import call_header, encoded_reply, hms, read_exactly, serve, string_field
from tests.security.test_admission import MB, peak_rss
from tests.security.tls import make_ca_and_server_cert

WORKERS = 2
SLOW_READERS = WORKERS + 2
#: More than a page (``PAGE_ROWS``), ~5 kB of parameters each: a ~8 MB reply, more than the socket buffers (up to 4 MB)
#: of a client that does not read hold.
PARTITIONS = PAGE_ROWS + 500


def _get_partitions(seqid: int) -> bytes:
    return (
        call_header("get_partitions", seqid)
        + string_field(1, b"big")
        + string_field(2, b"t")
        + b"\x06\x00\x03\xff\xff"  # field 3, i16 max_parts = -1
        + b"\x00"
    )


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A SQLite metastore holding table ``big.t`` (made once for the module), and the ``get_partitions``
    reply (seqid 1) built whole, as clients expect it."""
    root = tmp_path_factory.mktemp("filled")
    store = Metastore.open(make_config(f"sqlite:///{root}/metastore.db", root))
    try:
        store.catalog.create_database(Database(name="big"))
        table = store.catalog.create_table(make_table("big", "t", partition_keys=("p",)))
        parts = [
            make_partition(table, f"{index:05d}").model_copy(update={"parameters": {"note": "x" * 5000}})
            for index in range(PARTITIONS)
        ]
        for start in range(0, len(parts), 1000):
            store.catalog.add_partitions("big", "t", parts[start : start + 1000])
        found = store.catalog.get_partitions("big", "t")
        expected = encoded_reply("get_partitions", 1, [convert.partition_to_thrift(p) for p in found])
    finally:
        store.close()
    return root / "metastore.db", expected


def _copy(filled: tuple[Path, bytes], root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(filled[0], root / "metastore.db")
    return f"sqlite:///{root}/metastore.db"


def _slow_reader(port: int, tls: ssl.SSLContext | None) -> socket.socket:
    """A client with a tiny receive buffer that asks for the large reply and does not read it (yet)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    if tls is not None:
        sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
    sock.sendall(_get_partitions(1))
    return sock


@pytest.mark.parametrize("over_tls", [False, True], ids=["plain", "tls"])
def test_slow_readers_hold_no_worker_and_get_the_paged_reply_whole(
    filled: tuple[Path, bytes], tmp_path: Path, over_tls: bool
) -> None:
    db_url, expected = _copy(filled, tmp_path), filled[1]
    settings = {"HMSREPL_THRIFT_MAX_WORKERS": str(WORKERS)}
    tls: ssl.SSLContext | None = None
    if over_tls:
        certs = make_ca_and_server_cert(tmp_path / "tls")
        settings |= {
            "HMSREPL_THRIFT_TLS_CERT": str(certs["cert"]),
            "HMSREPL_THRIFT_TLS_KEY": str(certs["key"]),
        }
        tls = ssl.create_default_context(cafile=str(certs["ca"]))
    with serve(tmp_path, db_url, **settings) as server:
        client = (
            connect("127.0.0.1", server.port, tls_ca=str(certs["ca"]), timeout_ms=20_000)
            if over_tls
            else server.client(timeout_ms=20_000)
        )
        try:
            # A thriftpy2 client reads the paged reply: the same partitions as the reply built whole.
            served = client.get_partitions("big", "t", -1)
            assert len(served) == PARTITIONS
            factory = TCyBinaryProtocolFactory()
            assert b"".join(serialize(p, factory) for p in served) in expected

            readers = [_slow_reader(server.port, tls) for _ in range(SLOW_READERS)]
            try:
                time.sleep(1.0)  # every reply is under way, each stuck in its reader's full socket buffers
                samples = []
                for _ in range(20):
                    started = time.monotonic()
                    client.get_table("big", "t")
                    samples.append(time.monotonic() - started)
                print(
                    f"with {SLOW_READERS} slow readers and {WORKERS} workers: slowest call {max(samples) * 1000:.1f} ms"
                )
                assert max(samples) < 1.0, samples
                for reader in readers:  # and each slow reader gets its reply whole, byte for byte
                    assert read_exactly(reader, len(expected)) == expected
            finally:
                for reader in readers:
                    reader.close()
        finally:
            client.close()
        log = server.log()
        assert "Traceback" not in log


def test_concurrent_large_replies_wait_or_are_refused_within_the_budget(
    filled: tuple[Path, bytes], tmp_path: Path
) -> None:
    """Eight clients read the large table at once under a budget that holds about three of them (each page's
    decoding is charged before it is done, and the reply bytes not yet sent): each gets the whole list, after
    waiting if need be, or the method's MetaException naming the limit; the server grows less than the
    budget."""
    budget = 128 * MB
    settings = {"HMSREPL_THRIFT_MEMORY_BUDGET_BYTES": str(budget), "HMSREPL_THRIFT_MEMORY_WAIT_SECONDS": "1"}
    with serve(tmp_path, _copy(filled, tmp_path), **settings) as server:
        outcomes: list[object] = []

        def read() -> None:
            client = server.client(timeout_ms=60_000)
            try:
                outcomes.append(len(client.get_partitions("big", "t", -1)))
            except hms.MetaException as exc:
                outcomes.append(exc.message)
            finally:
                client.close()

        read()  # warm: statements compiled, connections pooled
        assert outcomes.pop() == PARTITIONS
        warm = server.rss_bytes()
        threads = [threading.Thread(target=read) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        grown = peak_rss(server) - warm
    served = [o for o in outcomes if o == PARTITIONS]
    refused = [o for o in outcomes if isinstance(o, str) and "HMSREPL_THRIFT_MEMORY_BUDGET_BYTES" in o]
    print(
        f"8 concurrent readers: {len(served)} served, {len(refused)} refused, peak RSS +{grown / MB:.0f} MB"
    )
    assert len(served) + len(refused) == 8, outcomes
    assert served, "calls that fit the budget are served"
    assert grown < budget, f"peak RSS +{grown / MB:.0f} MB under a {budget // MB} MB budget"


def test_a_graceful_stop_sends_the_rest_of_a_reply_being_written(
    filled: tuple[Path, bytes], tmp_path: Path
) -> None:
    """SIGTERM while a slow reader's reply is still queued: the server waits for the client to take it (within
    the drain time), then exits 0."""
    expected = filled[1]
    with serve(tmp_path, _copy(filled, tmp_path)) as server:
        reader = _slow_reader(server.port, None)
        try:
            time.sleep(1.0)  # the worker is done; the rest of the reply waits in the server
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            assert read_exactly(reader, len(expected)) == expected
        finally:
            reader.close()
        assert server.proc.wait(30) == 0
        assert "1 call(s) in flight finished" in server.log()


def test_a_paged_reply_over_sasl_auth_conf(filled: tuple[Path, bytes], tmp_path: Path, kdc: Kdc) -> None:
    """Under Kerberos with SASL privacy every piece of a paged reply is its own wrapped frame: a Hive-style
    client reads the same partitions."""
    settings = {**kerberos_settings(kdc), "HMSREPL_THRIFT_SASL_QOP": "auth-conf"}
    with serve(tmp_path, _copy(filled, tmp_path), **settings) as server:
        creds = client_credentials(f"alice@{REALM}", str(kdc.keytabs["alice"]), f"FILE:{kdc.root}/cc-alice")  # type: ignore[attr-defined]
        client = connect(
            "127.0.0.1", server.port, kerberos_principal=SERVICE_PRINCIPAL, credentials=creds, qop="auth-conf"
        )
        try:
            served = client.get_partitions("big", "t", -1)
        finally:
            client.close()
    factory = TCyBinaryProtocolFactory()
    assert len(served) == PARTITIONS
    assert b"".join(serialize(p, factory) for p in served) in filled[1]
