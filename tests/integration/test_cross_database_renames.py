"""Tables renamed between two replicated databases reach each replica, and only its own database changes.

``ALTER TABLE staging.events RENAME TO sales.events`` is logged under ``staging``: the dump of ``sales``
must still see the table arrive (it is bootstrapped inside the incremental dump, then followed by its
events), and the dump of ``staging`` must drop it on its replica. Each load writes only into its own target
database: the other replica's files stay as they were (hashed before and after).
"""

from __future__ import annotations

import os

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication import acid_replay
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.dump_events import read_events
from tests.helpers import make_partition, make_table, write_file
from tests.security.untouched import tree_hashes

# The replica on SQLite and PostgreSQL (the source is SQLite).
BACKENDS = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def partitioned(store: Metastore, db: str, name: str, days: tuple[str, ...]) -> None:
    table = store.catalog.create_table(make_table(db, name, partition_keys=("day",)))
    for day in days:
        add_day(store, db, name, day)
    assert table.partition_keys


def add_day(store: Metastore, db: str, name: str, day: str) -> None:
    table = store.catalog.get_table(db, name)
    [part] = store.catalog.add_partitions(db, name, [make_partition(table, day)])
    write_file(part.sd.location or "", f"{day}.parquet", f"{name} rows of {day}".encode())
    store.catalog.insert(db, name, [day])


def rename(store: Metastore, db: str, name: str, new_db: str, new_name: str) -> None:
    table = store.catalog.get_table(db, name)
    store.catalog.alter_table(db, name, table.model_copy(update={"db_name": new_db, "table_name": new_name}))


def sync(engine: ReplicationEngine, target: Metastore, db: str, policy: str | None = None) -> DumpDir:
    """One incremental dump of ``policy`` (default: all of ``db``) loaded into ``<db>_dr``."""
    policy = policy or db
    dumped = engine.execute(f"REPL DUMP {policy} FROM {repl_status(target, f'{db}_dr')}")
    engine.execute(f"REPL LOAD {db}_dr FROM '{dumped.dump_dir}'")
    return DumpDir(dumped.dump_dir)


def replica_files(target: Metastore, db: str) -> dict[str, str]:
    return tree_hashes(local_path(target.catalog.get_database(db).location_uri or ""))


def written(dump: DumpDir) -> list[tuple[str, str]]:
    return [(e["event_type"], e["table"]) for e in read_events(dump.uri)]


@pytest.fixture
def two_replicas(engine: ReplicationEngine, source: Metastore) -> ReplicationEngine:
    """``sales`` (table ``orders``) and ``staging`` (partitioned ``events``), each bootstrapped to its replica."""
    for db in ("sales", "staging", "other"):
        source.catalog.create_database(Database(name=db))
    partitioned(source, "sales", "orders", ("d1",))
    partitioned(source, "staging", "events", ("d1", "d2"))
    partitioned(source, "other", "untouched", ("d1",))
    for db in ("sales", "staging"):
        engine.execute(f"REPL LOAD {db}_dr FROM '{engine.execute(f'REPL DUMP {db}').dump_dir}'")
    return engine


@BACKENDS
def test_a_table_renamed_between_replicated_databases_moves_between_their_replicas(
    two_replicas: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    engine = two_replicas
    rename(source, "staging", "events", "sales", "events")
    add_day(source, "sales", "events", "d3")  # written after the rename, under its new database

    staging_files = replica_files(target, "staging_dr")
    dump = sync(engine, target, "sales")
    assert dump.read_metadata().bootstrapped_tables == ["events"]
    assert written(dump) == []  # the rename and the insert are in the bootstrapped table
    assert sorted(target.catalog.get_tables("sales_dr")) == ["events", "orders"]
    assert target.catalog.get_partition_names("sales_dr", "events") == ["day=d1", "day=d2", "day=d3"]
    assert verify(source, "sales", target, "sales_dr") == []
    assert replica_files(target, "staging_dr") == staging_files  # the other replica: not one file changed

    sales_files = replica_files(target, "sales_dr")
    dump = sync(engine, target, "staging")
    assert written(dump) == [("DROP_TABLE", "events")]
    assert target.catalog.get_tables("staging_dr") == []
    assert verify(source, "staging", target, "staging_dr") == []
    assert replica_files(target, "sales_dr") == sales_files

    # The table, followed by events again: an insert reaches the replica as an event, no bootstrap.
    add_day(source, "sales", "events", "d4")
    dump = sync(engine, target, "sales")
    assert dump.read_metadata().bootstrapped_tables == []
    assert ("ADD_PARTITION", "events") in written(dump)
    assert verify(source, "sales", target, "sales_dr") == []

    # Out again, under another name: the sales replica loses it as after a drop, staging's gets it.
    rename(source, "sales", "events", "staging", "events_v2")
    sales_dir = local_path(target.catalog.get_table("sales_dr", "events").sd.location or "")
    staging_files = replica_files(target, "staging_dr")
    dump = sync(engine, target, "sales")
    assert written(dump) == [("DROP_TABLE", "events")]
    assert target.catalog.get_tables("sales_dr") == ["orders"]
    assert verify(source, "sales", target, "sales_dr") == []
    assert replica_files(target, "staging_dr") == staging_files
    assert not any(files for _, _, files in os.walk(sales_dir))  # retired as a drop's files

    dump = sync(engine, target, "staging")
    assert dump.read_metadata().bootstrapped_tables == ["events_v2"]
    assert target.catalog.get_tables("staging_dr") == ["events_v2"]
    assert verify(source, "staging", target, "staging_dr") == []
    assert "other_dr" not in target.catalog.get_databases()


@BACKENDS
def test_a_rename_across_databases_follows_the_policy_s_table_filter(
    two_replicas: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    """Only the name in the policy's database counts: the other database's name is not the policy's."""
    engine = two_replicas
    policy = "sales.['orders', 't[0-9]+']"
    rename(source, "staging", "events", "sales", "t1")  # into the filter
    partitioned(source, "other", "orders_copy", ("d1",))
    rename(source, "other", "orders_copy", "sales", "scratch")  # into the database, not into the filter
    rename(source, "other", "untouched", "sales", "orders_x")  # neither
    dump = sync(engine, target, "sales", policy)
    assert dump.read_metadata().bootstrapped_tables == ["t1"]
    assert sorted(target.catalog.get_tables("sales_dr")) == ["orders", "t1"]
    assert verify(source, "sales", target, "sales_dr", parse_policy(policy)) == []

    rename(source, "sales", "scratch", "other", "orders")  # its old name is outside the filter: not a drop
    rename(source, "sales", "t1", "other", "t1")  # same name, another database: a drop
    dump = sync(engine, target, "sales", policy)
    assert written(dump) == [("DROP_TABLE", "t1")]
    assert target.catalog.get_tables("sales_dr") == ["orders"]
    assert verify(source, "sales", target, "sales_dr", parse_policy(policy)) == []


@BACKENDS
def test_tables_renamed_in_while_a_bootstrap_dump_lists_the_database_are_in_it(
    engine: ReplicationEngine, source: Metastore, target: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renamed in after the dump's first event id but before it lists the tables: read under the new names,
    they stay in the dump when its consolidation replays the renames (from another database, and from a
    name outside the policy's filter)."""
    policy = "sales.['orders', 'events', 't2']"
    for db in ("sales", "staging"):
        source.catalog.create_database(Database(name=db))
    partitioned(source, "sales", "orders", ("d1",))
    partitioned(source, "sales", "excluded", ("d1",))
    partitioned(source, "staging", "events", ("d1", "d2"))
    waited = acid_replay.wait_for_open_txns

    def renames_then_wait(*args: object, **kwargs: object) -> None:
        rename(source, "staging", "events", "sales", "events")
        rename(source, "sales", "excluded", "sales", "t2")
        add_day(source, "sales", "events", "d3")
        waited(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(acid_replay, "wait_for_open_txns", renames_then_wait)
    dumped = engine.execute(f"REPL DUMP {policy}")
    monkeypatch.undo()
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert sorted(target.catalog.get_tables("sales_dr")) == ["events", "orders", "t2"]
    assert target.catalog.get_partition_names("sales_dr", "events") == ["day=d1", "day=d2", "day=d3"]
    assert verify(source, "sales", target, "sales_dr", parse_policy(policy)) == []


def test_a_dump_finds_renames_into_its_database_without_inflating_the_log(source: Metastore) -> None:
    """A rename across databases is stored as plain JSON, so the log hands a dump only the events that name
    its database; other databases' (compressed) ALTER_TABLE events stay in the database."""
    for db in ("sales", "staging", "busy"):
        source.catalog.create_database(Database(name=db))
    big = {f"k{i}": "v" * 40 for i in range(60)}  # past the log's compression threshold
    for db, name in (("staging", "events"), ("busy", "noise")):
        source.catalog.create_table(make_table(db, name).model_copy(update={"parameters": big}))
    start = source.get_current_notification_event_id()
    noise = source.catalog.get_table("busy", "noise")
    source.catalog.alter_table("busy", "noise", noise.model_copy(update={"owner": "sales"}))
    rename(source, "staging", "events", "sales", "events")
    found = source.events.next_renames_into("sales", start)
    assert [(e.db_name, e.message_format) for e in found] == [("staging", "json-1")]
    assert source.events.next_renames_into("staging", start) == []
