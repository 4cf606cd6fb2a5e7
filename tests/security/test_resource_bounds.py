"""Resource attacks on a real ``hmsrepl metastore serve``: each is refused with a clear error, the server's
memory and CPU stay bounded, and another client is served within a bounded time meanwhile."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.bounds import ResourceBounds
from tests.security.serving import (
    ServerProcess,
    call_header,
    hms,
    read_reply,
    serve,
    string_field,
    string_field_header,
    string_list_header,
)

MB = 1024 * 1024
LIMIT = 16 * MB
TIMEOUT = 3.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("bounds")
    with serve(
        root,
        f"sqlite:///{root}/metastore.db",
        HMSREPL_THRIFT_MAX_MESSAGE_BYTES=str(LIMIT),
        HMSREPL_THRIFT_MAX_WORKERS="4",
        HMSREPL_THRIFT_CLIENT_TIMEOUT_SECONDS=str(TIMEOUT),
        HMSREPL_MAX_PARTITIONS_PER_CALL="5",
    ) as running:
        yield running


def assert_served(server: ServerProcess, within: float = 2.0) -> None:
    """Another client gets an answer within ``within`` seconds."""
    started = time.monotonic()
    client = server.client()
    try:
        assert "default" in client.get_all_databases()
    finally:
        client.close()
    assert time.monotonic() - started < within


def peak_rss(server: ServerProcess) -> int:
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_defaults_follow_hive() -> None:
    bounds = ResourceBounds()
    assert bounds.thrift_max_message_bytes == 100 * MB  # hive.metastore.server.max.message.size
    assert bounds.thrift_max_workers == 200  # hive.metastore.server.max.threads


def test_declared_300mb_string_is_refused_before_it_is_read(server: ServerProcess) -> None:
    before = peak_rss(server)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(call_header("get_database") + string_field_header(1, 300 * MB) + b"x" * 65536)
        started = time.monotonic()
        reply = read_reply(sock)
    assert time.monotonic() - started < 3  # answered at once, not after reading 300 MB
    assert b"exceeds the message size limit of 16777216 bytes (HMSREPL_THRIFT_MAX_MESSAGE_BYTES)" in reply
    assert peak_rss(server) - before < 20 * MB
    assert_served(server)


def test_streamed_300mb_list_is_refused_at_the_limit(server: ServerProcess) -> None:
    before = peak_rss(server)
    element = string_field_header(0, 1000)[3:] + b"n" * 1000  # i32 length + bytes
    chunk = element * 1000  # ~1 MB
    reply = b""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(
            call_header("get_partitions_by_names")
            + string_field(1, b"default")
            + string_field(2, b"t")
            + string_list_header(3, 300_000)
        )
        sent = 0
        try:
            while sent < 4 * LIMIT:  # the declared 300 MB are never needed: the server stops at 16 MB
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the server stopped reading once it had told us why
        reply = read_reply(sock)
    assert b"larger than the message size limit of 16777216 bytes" in reply
    assert peak_rss(server) - before < 100 * MB
    assert_served(server)


def test_large_requests_under_the_limit_are_served(server: ServerProcess) -> None:
    client = server.client()
    try:
        for name in ("big_a", "big_b"):  # twice on one connection: the grown read buffer is not a declaration
            client.create_database(hms.Database(name=name, description="d" * (8 * MB), parameters={}))
            assert len(client.get_database(name).description) == 8 * MB
    finally:
        client.close()


def test_slow_request_is_refused_after_the_client_timeout(server: ServerProcess) -> None:
    payload = call_header("get_database") + string_field(1, b"default") + b"\x00"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        started = time.monotonic()
        sock.sendall(payload[:20])
        try:
            for byte in payload[20:]:  # one byte every half second: each read is in time, the request is not
                if select.select([sock], [], [], 0.5)[0]:
                    break  # the server answered
                sock.sendall(bytes([byte]))
                assert_served(server)
        except OSError:
            pass
        sock.settimeout(10)
        reply = sock.recv(65536)  # the refusal, sent at once (the server then reads out the rest, bounded)
        assert time.monotonic() - started < TIMEOUT + 3
    assert b"not received within 3 s (HMSREPL_THRIFT_CLIENT_TIMEOUT_SECONDS)" in reply


def test_idle_connection_is_closed(server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        started = time.monotonic()
        assert read_reply(sock, timeout=TIMEOUT + 10) == b""
        assert TIMEOUT - 0.5 < time.monotonic() - started < TIMEOUT + 3


def test_a_full_pool_closes_the_longest_idle_connection_for_a_new_client(server: ServerProcess) -> None:
    idle = []
    for _ in range(4):  # every worker held by an idle connection, the first the longest
        idle.append(socket.create_connection(("127.0.0.1", server.port)))
        time.sleep(0.2)
    try:
        started = time.monotonic()
        client = server.client(timeout_ms=20_000)
        try:
            assert "default" in client.get_all_databases()
        finally:
            client.close()
        assert time.monotonic() - started < 2.5  # not after the idle timeout of the others
        assert read_reply(idle[0], timeout=5) == b""  # the longest idle was closed
        idle[-1].settimeout(0.2)
        with pytest.raises(TimeoutError):
            idle[-1].recv(1)  # the newest is still open
    finally:
        for sock in idle:
            sock.close()


def _sd(location: str | None = None) -> object:
    return hms.StorageDescriptor(
        cols=[hms.FieldSchema("id", "int", None)],
        location=location,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=hms.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


def test_partitions_per_call_are_capped_and_paging_works(server: ServerProcess) -> None:
    client = server.client()
    try:
        client.create_database(hms.Database(name="capped", parameters={}))
        client.create_table(
            hms.Table(
                tableName="t",
                dbName="capped",
                sd=_sd(),
                partitionKeys=[hms.FieldSchema("p", "int", None)],
                tableType="MANAGED_TABLE",
                parameters={},
            )
        )
        parts = [
            hms.Partition(values=[str(i)], dbName="capped", tableName="t", sd=_sd(), parameters={})
            for i in range(8)
        ]
        client.add_partitions(parts)
        with pytest.raises(hms.MetaException) as refused:
            client.get_partitions("capped", "t", -1)
        assert refused.value.message.startswith(
            "Number of partitions scanned (=8) on table 'capped.t' exceeds limit (=5)"
        )
        assert "HMSREPL_MAX_PARTITIONS_PER_CALL" in refused.value.message
        with pytest.raises(hms.MetaException, match=r"scanned \(>5\)"):
            client.get_partitions_by_filter("capped", "t", "p >= 0", -1)
        assert len(client.get_partitions("capped", "t", 5)) == 5
        assert len(client.get_partitions_by_filter("capped", "t", "p < 3", -1)) == 3
        names = client.get_partition_names("capped", "t", -1)  # names are cheap: paging reads them first
        assert len(names) == 8
        pages = [client.get_partitions_by_names("capped", "t", names[i : i + 5]) for i in range(0, 8, 5)]
        assert sorted(p.values[0] for page in pages for p in page) == [str(i) for i in range(8)]
    finally:
        client.close()


def test_accept_backs_off_when_out_of_file_descriptors(tmp_path: Path) -> None:
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db", nofile=64) as server:
        assert_served(server, within=5)
        clients: list[socket.socket] = []
        try:
            for _ in range(80):  # more than the process may open: accept fails with EMFILE
                clients.append(socket.create_connection(("127.0.0.1", server.port)))
            time.sleep(1.0)
            cpu = server.cpu_seconds()
            time.sleep(3.0)
            assert server.cpu_seconds() - cpu < 0.5  # backing off, not spinning on the pending connections
            assert "accept failed ([Errno 24] Too many open files)" in server.log()
        finally:
            for sock in clients:
                sock.close()
        result: list[BaseException | None] = []

        def call() -> None:
            try:
                assert_served(server, within=10)
                result.append(None)
            except BaseException as exc:  # reported by the main thread
                result.append(exc)

        worker = threading.Thread(target=call)
        worker.start()
        worker.join(30)
        assert result == [None]


def test_backtracking_name_pattern_answers_at_once(server: ServerProcess) -> None:
    client = server.client()
    try:
        client.create_database(hms.Database(name="patterns", parameters={}))
        names = ["a" * 117 + f"{i:03d}" for i in range(20)] + ["a" * 119 + "b"]
        for name in names:
            client.create_table(
                hms.Table(
                    tableName=name, dbName="patterns", sd=_sd(), tableType="MANAGED_TABLE", parameters={}
                )
            )
        started = time.monotonic()
        assert client.get_tables("patterns", "*a*a*a*a*b") == [names[-1]]
        assert sorted(client.get_tables("patterns", "*A*A*0*|nothing")) == sorted(names[:20])
        assert time.monotonic() - started < 1.0
        with pytest.raises(hms.MetaException, match="longer than 10000; use a shorter pattern"):
            client.get_tables("patterns", "*a" * 6000)
    finally:
        client.close()
    assert_served(server)


def current_rss(server: ServerProcess) -> int:
    return server.rss_bytes()


def test_a_large_request_does_not_pin_memory_to_its_connection(tmp_path: Path) -> None:
    """A connection that once sent a large (allowed) request keeps no buffer of that size while it stays open:
    otherwise every worker could pin a message's worth of memory."""
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db") as server:
        client = server.client(timeout_ms=120_000)
        try:
            client.get_all_databases()
            before = current_rss(server)
            assert client.get_config_value("k" * (60 * MB), "default") == "default"  # read in full, answered
            client.get_all_databases()
            time.sleep(0.5)
            assert current_rss(server) - before < 30 * MB  # the connection is still open
        finally:
            client.close()
