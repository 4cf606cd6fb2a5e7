"""SIGTERM stops a real server gracefully: no new connections, idle ones closed at once, calls in flight
finish (bounded by the drain time), then the process logs what it did and exits 0."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from tests.security.serving import ServerProcess, hms, read_reply, serve
from tests.security.test_resource_bounds import _sd

PARTITIONS = 3000


def _table(server: ServerProcess) -> None:
    client = server.client()
    try:
        client.create_database(hms.Database(name="sales", parameters={}))
        client.create_table(
            hms.Table(
                tableName="orders",
                dbName="sales",
                sd=_sd(),
                partitionKeys=[hms.FieldSchema("day", "int", None)],
                tableType="MANAGED_TABLE",
                parameters={},
            )
        )
    finally:
        client.close()


def _add_partitions_in_background(
    server: ServerProcess, outcome: list[Any], count: int = PARTITIONS
) -> threading.Thread:
    def call() -> None:
        client = server.client(timeout_ms=300_000)
        try:
            parts = [
                hms.Partition(values=[str(i)], dbName="sales", tableName="orders", sd=_sd(), parameters={})
                for i in range(count)
            ]
            outcome.append(client.add_partitions(parts))
        except BaseException as exc:  # checked by the test thread
            outcome.append(exc)
        finally:
            client.close()

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def _wait_in_flight(server: ServerProcess, thread: threading.Thread) -> None:
    """The call is being served once its first partition directory exists."""
    table_dir = Path(server.root, "warehouse", "sales.db", "orders")
    deadline = time.monotonic() + 120
    while not (table_dir.is_dir() and any(table_dir.iterdir())):
        assert thread.is_alive() and time.monotonic() < deadline, "add_partitions never started"
        time.sleep(0.02)


def _partition_count(server: ServerProcess) -> int:
    store = Metastore(
        MetastoreConfig(
            db_url=server.db_url, warehouse=str(server.root / "warehouse"), cmroot=str(server.root / "cmroot")
        )
    )
    try:
        return len(store.catalog.get_partition_names("sales", "orders"))
    finally:
        store.close()


def test_sigterm_lets_the_call_in_flight_finish_and_refuses_new_connections(tmp_path: Path) -> None:
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db") as server:
        _table(server)
        idle = socket.create_connection(("127.0.0.1", server.port))
        outcome: list[Any] = []
        thread = _add_partitions_in_background(server, outcome)
        _wait_in_flight(server, thread)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.port), timeout=5)
        started = time.monotonic()
        assert (
            read_reply(idle, timeout=10) == b""
        )  # the idle connection is closed at once, not after the drain
        assert time.monotonic() - started < 3
        idle.close()
        thread.join(120)
        assert server.proc.wait(60) == 0
        assert outcome == [PARTITIONS], outcome  # the call completed and answered
        log = server.log()
    assert _partition_count(server) == PARTITIONS
    assert "SIGTERM received: stopping gracefully" in log
    assert "stopping: 1 call(s) in flight finished in" in log
    # File work a crash left pending is completed on the way out (here: none).
    assert "stopping: file work left pending: 0 completed, 0 failed, 0 skipped" in log
    assert log.rstrip().endswith("stopped")
    assert "Traceback" not in log


def test_drain_time_bounds_the_wait(tmp_path: Path) -> None:
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db", HMSREPL_THRIFT_DRAIN_SECONDS="0.2") as server:
        _table(server)
        outcome: list[Any] = []
        # A call far longer than the drain time (20,000 partitions take seconds), whatever the machine.
        thread = _add_partitions_in_background(server, outcome, count=20_000)
        _wait_in_flight(server, thread)
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(60) == 0
        assert time.monotonic() - started < 10
        thread.join(60)
        log = server.log()
    assert len(outcome) == 1 and isinstance(outcome[0], Exception)  # cut: the client sees the connection end
    assert "1 call(s) still running were abandoned (each commits whole or not at all)" in log
    # Nothing half-committed: the abandoned call's one transaction either committed before the process
    # ended (the shutdown work waits for the database) or never did.
    assert _partition_count(server) in (0, 20_000)


def test_a_call_in_flight_is_never_closed_to_make_room(tmp_path: Path) -> None:
    with serve(tmp_path, f"sqlite:///{tmp_path}/metastore.db", HMSREPL_THRIFT_MAX_WORKERS="1") as server:
        _table(server)
        outcome: list[Any] = []
        thread = _add_partitions_in_background(server, outcome)
        _wait_in_flight(server, thread)
        client = server.client(timeout_ms=120_000)  # waits in the backlog: the only worker is in a call
        try:
            assert "sales" in client.get_all_databases()
        finally:
            client.close()
        thread.join(120)
        assert outcome == [PARTITIONS]  # the call finished and answered before the waiting client was served
