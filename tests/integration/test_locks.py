"""Hive's lock API: semantics in process, then two server processes sharing one database on each backend.

The remote client is the Apache Thrift binding of Hive's IDL that pyiceberg ships on PyPI (``hive_metastore``),
i.e. what Iceberg's Hive catalog sends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore as HiveService
from hive_metastore import ttypes as ht
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import TSocket, TTransport

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import (
    InvalidObjectError,
    NoSuchDatabaseError,
    NoSuchLockError,
    TxnAbortedError,
    TxnOpenError,
)
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.locks import ACQUIRED, NOT_ACQUIRED, WAITING, LockComponent, compatible
from tests.backends import BACKENDS, temporary_database
from tests.helpers import create_db_and_table
from tests.servers import RunningMetastore, metastore_server

R, W, X, E = "SHARED_READ", "SHARED_WRITE", "EXCL_WRITE", "EXCLUSIVE"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Metastore]:
    s = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/ms.db", warehouse=str(tmp_path / "wh"), cmroot=str(tmp_path / "cm")
        )
    )
    create_db_and_table(s, "sales", "orders", partition_keys=("day",))
    yield s
    s.close()


def table_lock(kind: str, table: str = "orders", partition: str | None = None) -> LockComponent:
    return LockComponent(kind, "sales", table, partition)


def test_compatibility_matrix_is_hives() -> None:
    expected = {  # requested -> types it may coexist with (Hive 3/4)
        R: {R, W, X},
        W: {R, W},
        X: {R},
        E: set(),
    }
    codes = {R: "r", W: "w", X: "x", E: "e"}
    for requested, allowed in expected.items():
        for held in (R, W, X, E):
            assert compatible(codes[requested], codes[held]) == (held in allowed), (requested, held)


def test_exclusive_excludes_and_shared_reads_coexist(store: Metastore) -> None:
    locks = store.locks
    r1 = locks.lock([table_lock(R)])
    r2 = locks.lock([table_lock(R)])
    assert (r1.state, r2.state) == (ACQUIRED, ACQUIRED)
    e = locks.lock([table_lock(E)])
    assert e.state == WAITING
    # A reader arriving after the waiting writer queues behind it (no writer starvation).
    r3 = locks.lock([table_lock(R)])
    assert r3.state == WAITING
    locks.unlock(r1.lock_id)
    assert locks.check_lock(e.lock_id).state == WAITING
    locks.unlock(r2.lock_id)
    assert locks.check_lock(e.lock_id).state == ACQUIRED
    assert locks.check_lock(r3.lock_id).state == WAITING
    locks.unlock(e.lock_id)
    assert locks.check_lock(r3.lock_id).state == ACQUIRED
    # Another table, and a database lock on another database, never conflict.
    assert locks.lock([table_lock(E, "other")]).state == ACQUIRED


def test_levels_db_table_partition(store: Metastore) -> None:
    locks = store.locks
    p1 = locks.lock([table_lock(E, partition="day=1")])
    assert locks.lock([table_lock(E, partition="day=2")]).state == ACQUIRED
    assert locks.lock([table_lock(R)]).state == WAITING  # the table meets its partitions' locks
    assert locks.lock([LockComponent(X, "sales")]).state == WAITING  # the database meets everything in it
    locks.unlock(p1.lock_id)
    shown = {(i.table_name, i.partition_name, i.state) for i in locks.show_locks("sales")}
    assert ("orders", "day=2", ACQUIRED) in shown


def test_shared_write_semantics_and_zero_wait(store: Metastore) -> None:
    locks = store.locks
    assert locks.lock([table_lock(W)]).state == ACQUIRED
    assert locks.lock([table_lock(W)]).state == ACQUIRED
    assert locks.lock([table_lock(R)]).state == ACQUIRED
    refused = locks.lock([table_lock(X)], zero_wait=True)
    assert refused.state == NOT_ACQUIRED
    assert all(i.lock_id != refused.lock_id for i in locks.show_locks())  # withdrawn, not left queued


def test_txn_locks_live_until_commit_or_abort(store: Metastore) -> None:
    locks = store.locks
    [t1, t2] = store.txns.open_txns(2)
    held = locks.lock([table_lock(E)], txn_id=t1)
    assert held.state == ACQUIRED
    assert locks.lock([table_lock(W)], txn_id=t1).state == ACQUIRED  # a txn's own locks never block it
    other = locks.lock([table_lock(R)], txn_id=t2)
    assert other.state == WAITING
    with pytest.raises(TxnOpenError, match=f"transaction {t1}"):
        locks.unlock(held.lock_id)
    store.txns.commit_txn(t1)
    assert locks.show_locks(txn_id=t1) == []
    assert locks.check_lock(other.lock_id).state == ACQUIRED
    store.txns.abort_txns([t2])
    assert locks.show_locks() == []
    with pytest.raises(TxnAbortedError):
        locks.lock([table_lock(R)], txn_id=t2)


def test_bad_input_changes_nothing(store: Metastore) -> None:
    locks = store.locks
    before = locks.show_locks()
    with pytest.raises(NoSuchDatabaseError, match="'nodb'"):
        locks.lock([LockComponent(E, "nodb", "t")])
    with pytest.raises(NoSuchLockError, match="lock 4242 does not exist"):
        locks.unlock(4242)
    with pytest.raises(NoSuchLockError):
        locks.check_lock(4242)
    with pytest.raises(NoSuchLockError):
        locks.heartbeat(lock_id=4242)
    with pytest.raises(InvalidObjectError, match="no components"):
        locks.lock([])
    assert locks.show_locks() == before


def test_abandoned_standalone_lock_times_out(store: Metastore) -> None:
    locks = store.locks
    held = locks.lock([table_lock(E)])
    waiter = locks.lock([table_lock(E)])
    now = time.time()
    locks.heartbeat(lock_id=waiter.lock_id)
    # The waiter keeps heartbeating (check_lock does); the holder went silent past the timeout.
    assert locks.release_timed_out(now=now + locks.timeout_seconds - 1) == 0
    assert locks.release_timed_out(now=now + locks.timeout_seconds + 1) >= 1
    with pytest.raises(NoSuchLockError):
        locks.check_lock(held.lock_id)


# -- two server processes on one database ------------------------------------------------------------------
class Client:
    """Apache Thrift's generated Hive client (pyiceberg's vendored bindings) over a buffered socket."""

    def __init__(self, port: int) -> None:
        self.transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
        self.client = HiveService.Client(TBinaryProtocol.TBinaryProtocol(self.transport))
        self.transport.open()

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def close(self) -> None:
        self.transport.close()


def _request(kind: int, table: str = "t") -> ht.LockRequest:
    component = ht.LockComponent(type=kind, level=ht.LockLevel.TABLE, dbname="default", tablename=table)
    return ht.LockRequest(component=[component], user="tester", hostname="localhost")


@pytest.fixture(scope="module", params=BACKENDS)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningMetastore, RunningMetastore]]:
    root = tmp_path_factory.mktemp(f"locks-{request.param}")
    timeout = {"HMSREPL_TXN_TIMEOUT_SECONDS": "3"}
    with (
        temporary_database(request.param, str(root)) as url,
        metastore_server(root, url, **timeout) as one,
        metastore_server(root, url, **timeout) as two,
    ):
        yield one, two


def test_two_servers_exclusive_and_shared(servers: tuple[RunningMetastore, RunningMetastore]) -> None:
    a, b = Client(servers[0].port), Client(servers[1].port)
    try:
        first = a.lock(_request(ht.LockType.EXCLUSIVE, "mutex"))
        second = b.lock(_request(ht.LockType.EXCLUSIVE, "mutex"))
        assert (first.state, second.state) == (ht.LockState.ACQUIRED, ht.LockState.WAITING)
        assert b.check_lock(ht.CheckLockRequest(lockid=second.lockid)).state == ht.LockState.WAITING
        shown = b.show_locks(ht.ShowLocksRequest(dbname="default", tablename="mutex")).locks
        assert {(e.lockid, e.state, e.type) for e in shown} == {
            (first.lockid, ht.LockState.ACQUIRED, ht.LockType.EXCLUSIVE),
            (second.lockid, ht.LockState.WAITING, ht.LockType.EXCLUSIVE),
        }
        a.unlock(ht.UnlockRequest(lockid=first.lockid))
        assert b.check_lock(ht.CheckLockRequest(lockid=second.lockid)).state == ht.LockState.ACQUIRED
        b.unlock(ht.UnlockRequest(lockid=second.lockid))

        reads = [c.lock(_request(ht.LockType.SHARED_READ, "shared")) for c in (a, b, a)]
        assert {r.state for r in reads} == {ht.LockState.ACQUIRED}
        for r in reads:
            a.unlock(ht.UnlockRequest(lockid=r.lockid))

        with pytest.raises(ht.NoSuchLockException, match="lock 987654 does not exist"):
            b.unlock(ht.UnlockRequest(lockid=987654))
        with pytest.raises(ht.NoSuchLockException):
            b.heartbeat(ht.HeartbeatRequest(lockid=987654))
        # lock() declares only txn exceptions: Hive answers others as an application error, as here.
        missing = ht.LockComponent(
            type=ht.LockType.EXCLUSIVE, level=ht.LockLevel.TABLE, dbname="nodb", tablename="t"
        )
        with pytest.raises(TApplicationException, match="database 'nodb' does not exist"):
            a.lock(ht.LockRequest(component=[missing], user="tester", hostname="localhost"))
        assert b.show_locks(ht.ShowLocksRequest()).locks == []
    finally:
        a.close()
        b.close()


def test_two_servers_mutual_exclusion_under_contention(
    servers: tuple[RunningMetastore, RunningMetastore], tmp_path: Path
) -> None:
    """Six workers on two servers do read-modify-write on a file under an exclusive lock: no update is lost."""
    counter = tmp_path / "counter"
    counter.write_text("0")
    rounds, errors = 4, []

    def worker(port: int) -> None:
        client = Client(port)
        try:
            for _ in range(rounds):
                response = client.lock(_request(ht.LockType.EXCLUSIVE, "counter"))
                while response.state == ht.LockState.WAITING:
                    time.sleep(0.02)
                    response = client.check_lock(ht.CheckLockRequest(lockid=response.lockid))
                assert response.state == ht.LockState.ACQUIRED
                value = int(counter.read_text())
                time.sleep(0.01)  # widen the window a broken lock would let another writer in
                counter.write_text(str(value + 1))
                client.unlock(ht.UnlockRequest(lockid=response.lockid))
        except Exception as exc:  # reported below: an assertion in a thread would be lost
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(s.port,)) for s in (*servers, *servers, *servers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert int(counter.read_text()) == rounds * len(threads)


def test_two_servers_abandoned_lock_is_released_after_timeout(
    servers: tuple[RunningMetastore, RunningMetastore],
) -> None:
    a, b = Client(servers[0].port), Client(servers[1].port)
    try:
        abandoned = a.lock(_request(ht.LockType.EXCLUSIVE, "abandoned"))
        waiter = b.lock(_request(ht.LockType.EXCLUSIVE, "abandoned"))
        assert waiter.state == ht.LockState.WAITING
        deadline = time.monotonic() + 15
        state = waiter.state
        while state == ht.LockState.WAITING and time.monotonic() < deadline:
            time.sleep(0.5)  # the waiter's check_lock heartbeats it; the holder is silent
            state = b.check_lock(ht.CheckLockRequest(lockid=waiter.lockid)).state
        assert state == ht.LockState.ACQUIRED
        with pytest.raises(ht.NoSuchLockException):
            a.check_lock(ht.CheckLockRequest(lockid=abandoned.lockid))
        b.unlock(ht.UnlockRequest(lockid=waiter.lockid))
    finally:
        a.close()
        b.close()


def test_two_servers_txn_lock_released_by_commit(servers: tuple[RunningMetastore, RunningMetastore]) -> None:
    a, b = Client(servers[0].port), Client(servers[1].port)
    try:
        [txn] = a.open_txns(ht.OpenTxnRequest(num_txns=1, user="tester", hostname="localhost")).txn_ids
        request = _request(ht.LockType.EXCL_WRITE, "acid")
        request.txnid = txn
        held = a.lock(request)
        assert held.state == ht.LockState.ACQUIRED
        reader = b.lock(_request(ht.LockType.SHARED_READ, "acid"))
        writer = b.lock(_request(ht.LockType.SHARED_WRITE, "acid"))
        assert (reader.state, writer.state) == (ht.LockState.ACQUIRED, ht.LockState.WAITING)
        with pytest.raises(ht.TxnOpenException):
            b.unlock(ht.UnlockRequest(lockid=held.lockid))
        a.heartbeat(ht.HeartbeatRequest(txnid=txn))
        b.commit_txn(ht.CommitTxnRequest(txnid=txn))
        assert b.check_lock(ht.CheckLockRequest(lockid=writer.lockid)).state == ht.LockState.ACQUIRED
        for lock in (reader, writer):
            a.unlock(ht.UnlockRequest(lockid=lock.lockid))
    finally:
        a.close()
        b.close()
