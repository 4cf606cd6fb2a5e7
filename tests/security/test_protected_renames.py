"""A table renamed into (or out of) a protected replica database is refused, and moves nothing.

A client of the replica's metastore owns a writable database next to the replica; ``alter_table`` with a new
``dbName`` naming the replica would move its table (and its files) into the replica's warehouse directory,
where only replication loads may write. The refusal is decided where every write commits (a write whose
before- or after-state names a protected database), not by the rename's handler.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import ReplicaProtectedError
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.helpers import make_table, open_replica, open_sqlite_source, write_file
from tests.security.untouched import Untouched


@pytest.fixture(params=["sqlite", "postgres"])
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    """A replica ``sales_dr`` (table ``orders`` with a file) and a writable ``scratch`` database beside it."""
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    source = open_sqlite_source(tmp_path)
    with temporary_database(request.param, str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        try:
            source.catalog.create_database(Database(name="sales"))
            orders = source.catalog.create_table(make_table("sales", "orders"))
            write_file(orders.sd.location or "", "f1", b"one")
            source.catalog.insert("sales", "orders")
            engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
            engine.execute(f"REPL LOAD sales_dr FROM '{engine.execute('REPL DUMP sales').dump_dir}'")
            target.catalog.create_database(Database(name="scratch"))
            mine = target.catalog.create_table(make_table("scratch", "mine"))
            write_file(mine.sd.location or "", "planted", b"attacker's rows")
            target.catalog.insert("scratch", "mine")
            yield target
        finally:
            target.close()
            source.close()


def _guarded(store: Metastore) -> list[Path | str]:
    return [store.config.warehouse, store.config.cmroot]


def test_rename_into_a_protected_replica_is_refused_and_moves_nothing(replica: Metastore) -> None:
    c = replica.catalog
    mine = c.get_table("scratch", "mine")
    before = Untouched.take(_guarded(replica), [replica])
    for new_name in ("mine", "orders_v2"):
        moved = mine.model_copy(update={"db_name": "sales_dr", "table_name": new_name})
        with pytest.raises(ReplicaProtectedError) as info:
            c.alter_table("scratch", "mine", moved)
        message = str(info.value)
        assert "'sales_dr' is a protected replica of 'sales'" in message and "\n" not in message, message
    before.assert_same(_guarded(replica), [replica])
    assert Path(local_path(mine.sd.location or ""), "planted").is_file()


def test_rename_out_of_a_protected_replica_is_refused(replica: Metastore) -> None:
    c = replica.catalog
    orders = c.get_table("sales_dr", "orders")
    before = Untouched.take(_guarded(replica), [replica])
    with pytest.raises(ReplicaProtectedError, match="'sales_dr' is a protected replica"):
        c.alter_table("sales_dr", "orders", orders.model_copy(update={"db_name": "scratch"}))
    before.assert_same(_guarded(replica), [replica])


def test_the_commit_check_alone_refuses_the_rename(
    replica: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the check when the event is emitted, the commit still refuses (the database is unchanged)."""
    from hmsrepl.metastore import eventlog

    monkeypatch.setattr(eventlog, "check_crossing", lambda conn, event: None)
    c = replica.catalog
    mine = c.get_table("scratch", "mine")
    with pytest.raises(ReplicaProtectedError, match="'sales_dr' is a protected replica"):
        c.alter_table("scratch", "mine", mine.model_copy(update={"db_name": "sales_dr"}))
    assert c.get_tables("sales_dr") == ["orders"] and c.get_table("scratch", "mine")
