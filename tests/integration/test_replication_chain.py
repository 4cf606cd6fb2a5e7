"""A replica that is itself a source: source -> mid -> end, on real metastores (SQLite and PostgreSQL).

The mid replica logs what its loads apply like any other write (data events with files and checksums), so
dumping it gives a faithful stream. Each source change is replicated one event at a time (LIMIT 1) to the
mid, which is then replicated in full to the end; whenever the mid stands at an event id after which the
source's state was captured, the end must equal that state (``repl verify`` semantics: metadata and file
checksums, ACID snapshots and write-id state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hmsrepl.acid import InsertOnlyWriter
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import DatabaseState, capture_state, diff_states, verify
from hmsrepl.storage.base import filesystem_for
from tests.backends import temporary_database
from tests.helpers import make_partition, make_table, write_file

ACID = {"transactional": "true", "transactional_properties": "insert_only"}


@pytest.fixture(params=["sqlite", "postgres"])
def chain_backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    return request.param


@pytest.fixture
def stores(chain_backend: str, tmp_path: Path) -> Iterator[tuple[Metastore, Metastore, Metastore]]:
    opened: list[Metastore] = []
    with (
        temporary_database(chain_backend, str(tmp_path)) as src_url,
        temporary_database(chain_backend, str(tmp_path)) as mid_url,
        temporary_database(chain_backend, str(tmp_path)) as end_url,
    ):
        for name, url in (("src", src_url), ("mid", mid_url), ("end", end_url)):
            root = tmp_path / name
            config = MetastoreConfig(db_url=url, warehouse=str(root / "wh"), cmroot=str(root / "cm"))
            opened.append(Metastore.open(config))
        try:
            yield opened[0], opened[1], opened[2]
        finally:
            for store in opened:
                store.close()


def acid_write(store: Metastore, table: str, rows: bytes, *, values=None, mode: str = "append") -> None:
    writer = InsertOnlyWriter(store, "sales", table, values, mode=mode, heartbeat=False).begin()
    write_file(writer.target_uri, "part-0.txt", rows)
    writer.commit()


def acid_abort(store: Metastore, table: str, rows: bytes) -> None:
    writer = InsertOnlyWriter(store, "sales", table, None, heartbeat=False).begin()
    write_file(writer.target_uri, "part-0.txt", rows)
    writer.abort()


def operations(src: Metastore) -> list[Callable[[], None]]:
    """Source changes of every kind; each one is followed by a capture of the source's state."""
    c = src.catalog

    def insert_u() -> None:
        write_file(c.get_table("sales", "u").sd.location, "f2", b"two")
        c.insert("sales", "u")

    def overwrite_u() -> None:
        new = write_file(c.get_table("sales", "u").sd.location, "f3", b"three, replacing")
        c.insert("sales", "u", new_files=[new], replace=True)

    def add_partition_d2() -> None:
        [d2] = c.add_partitions("sales", "p", [make_partition(c.get_table("sales", "p"), "d2")])
        write_file(d2.sd.location, "x", b"d2 rows")
        c.insert("sales", "p", ["d2"])

    def insert_d1() -> None:
        write_file(c.get_partition("sales", "p", ["d1"]).sd.location, "y", b"more d1 rows")
        c.insert("sales", "p", ["d1"])

    def overwrite_d1() -> None:
        new = write_file(c.get_partition("sales", "p", ["d1"]).sd.location, "z", b"d1 overwritten")
        c.insert("sales", "p", ["d1"], new_files=[new], replace=True)

    def alter_partition_d1() -> None:
        d1 = c.get_partition("sales", "p", ["d1"])
        c.alter_partitions("sales", "p", [d1.model_copy(update={"parameters": {"k": "v"}})])

    def truncate_u() -> None:
        c.truncate_table("sales", "u")

    def refill_u() -> None:
        write_file(c.get_table("sales", "u").sd.location, "f4", b"after truncate")
        c.insert("sales", "u")

    def drop_partition_d2() -> None:
        c.drop_partitions("sales", "p", [["d2"]])

    def rename_u() -> None:
        u = c.get_table("sales", "u")
        c.alter_table("sales", "u", u.model_copy(update={"table_name": "u2"}))

    def insert_renamed() -> None:
        write_file(c.get_table("sales", "u2").sd.location, "f5", b"after rename")
        c.insert("sales", "u2")

    def alter_p() -> None:
        p = c.get_table("sales", "p")
        c.alter_table("sales", "p", p.model_copy(update={"parameters": {**p.parameters, "owner": "ops"}}))

    def create_t() -> None:
        t = c.create_table(make_table("sales", "t"))
        write_file(t.sd.location, "a", b"first t")
        c.insert("sales", "t")

    def drop_t() -> None:
        c.drop_table("sales", "t")

    def recreate_t() -> None:  # the same name again, other data
        t = c.create_table(make_table("sales", "t"))
        write_file(t.sd.location, "b", b"second t")
        c.insert("sales", "t")

    def alter_database() -> None:
        db = c.get_database("sales")
        c.alter_database("sales", db.model_copy(update={"parameters": {"owner_team": "ops"}}))

    return [
        insert_u,
        overwrite_u,
        add_partition_d2,
        insert_d1,
        overwrite_d1,
        alter_partition_d1,
        lambda: acid_write(src, "orders", b"acid 1"),
        lambda: acid_write(src, "orders", b"acid 2"),
        lambda: acid_abort(src, "orders", b"aborted, never visible"),
        lambda: acid_write(src, "orders", b"acid 3 replaces all", mode="overwrite"),
        lambda: acid_write(src, "daily", b"acid d1", values=["d1"]),
        truncate_u,
        refill_u,
        drop_partition_d2,
        rename_u,
        insert_renamed,
        alter_p,
        create_t,
        drop_t,
        recreate_t,
        lambda: c.drop_table("sales", "p"),
        alter_database,
    ]


def seed(src: Metastore) -> None:
    c = src.catalog
    c.create_database(Database(name="sales"))
    u = c.create_table(make_table("sales", "u"))
    write_file(u.sd.location, "f1", b"one")
    c.insert("sales", "u")
    p = c.create_table(make_table("sales", "p", partition_keys=("day",)))
    [d1] = c.add_partitions("sales", "p", [make_partition(p, "d1")])
    write_file(d1.sd.location, "x", b"d1 rows")
    c.insert("sales", "p", ["d1"])
    c.create_table(make_table("sales", "orders", **ACID))
    days = c.create_table(make_table("sales", "daily", partition_keys=("day",), **ACID))
    c.add_partitions("sales", "daily", [make_partition(days, "d1")])
    acid_write(src, "orders", b"acid 0")


def test_source_mid_end_equal_at_every_replicated_id(stores, tmp_path: Path) -> None:
    src, mid, end = stores
    first = ReplicationEngine(str(tmp_path / "dumps1"), src, mid)
    second = ReplicationEngine(str(tmp_path / "dumps2"), mid, end)
    seed(src)
    dumped = first.execute("REPL DUMP sales")
    first.execute(f"REPL LOAD sales_mid FROM '{dumped.dump_dir}'")
    dumped = second.execute("REPL DUMP sales_mid")
    second.execute(f"REPL LOAD sales_end FROM '{dumped.dump_dir}'")
    assert verify(src, "sales", end, "sales_end") == []

    states: dict[int, DatabaseState] = {}
    for operation in operations(src):
        operation()
        states[src.get_current_notification_event_id()] = capture_state(src, "sales")
    compared = 0
    while repl_status(mid, "sales_mid") < src.get_current_notification_event_id():
        last = repl_status(mid, "sales_mid")
        step = first.execute(f"REPL DUMP sales FROM {last} LIMIT 1")
        first.execute(f"REPL LOAD sales_mid FROM '{step.dump_dir}'")
        step = second.execute(f"REPL DUMP sales_mid FROM {repl_status(end, 'sales_end')}")
        second.execute(f"REPL LOAD sales_end FROM '{step.dump_dir}'")
        # The end's position counts the mid's own events, never the source's the mid records.
        assert repl_status(end, "sales_end") == mid.get_current_notification_event_id()
        at = repl_status(mid, "sales_mid")
        if at in states:
            assert diff_states(states[at], capture_state(end, "sales_end")) == [], f"source event {at}"
            compared += 1
    assert compared == len(states)
    assert verify(src, "sales", end, "sales_end") == []
    # The two positions live in different event-id spaces (the mid logs its own loads' work and positions).
    assert mid.get_current_notification_event_id() != src.get_current_notification_event_id()


def test_mid_logs_data_events_with_files(stores, tmp_path: Path) -> None:
    """What a load applies is in the replica's log: an INSERT with the files and checksums it copied."""
    src, mid, _ = stores
    engine = ReplicationEngine(str(tmp_path / "dumps"), src, mid)
    seed(src)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_mid FROM '{dumped.dump_dir}'")
    before = mid.get_current_notification_event_id()
    c = src.catalog
    write_file(c.get_table("sales", "u").sd.location, "f2", b"two")
    c.insert("sales", "u")
    new = write_file(c.get_partition("sales", "p", ["d1"]).sd.location, "z", b"d1 overwritten")
    c.insert("sales", "p", ["d1"], new_files=[new], replace=True)
    dumped = engine.execute(f"REPL DUMP sales FROM {repl_status(mid, 'sales_mid')}")
    engine.execute(f"REPL LOAD sales_mid FROM '{dumped.dump_dir}'")
    # A load publishes new data as a new version of the object (location flip), logged as the ALTER that
    # switches the location, with what changed in the version it holds (format 2: a data change).
    data = {
        e.table_name: parse_event(e).objects()[0].change
        for e in mid.events.next_events(before)
        if e.event_type in (EventType.ALTER_TABLE, EventType.ALTER_PARTITION) and parse_event(e).objects()
    }
    assert set(data) == {"u", "p"}
    assert [uri.split("#")[0].rsplit("/", 1)[-1] for uri in data["u"].added] == ["f2"]  # the append
    assert data["u"].count == 2 and not data["u"].complete
    assert all(uri.startswith(mid.config.warehouse) for uri in data["u"].added)
    assert [u.split("#")[0].rsplit("/", 1)[-1] for u in data["p"].added] == ["z"]  # the overwrite's listing
    assert data["p"].count == 1 and (data["p"].complete or data["p"].removed)
    # Checksums are the ones the copy verified: equal to the mid's files as they are.
    for uri in data["u"].added + data["p"].added:
        path, checksum = uri.split("#")[:2]
        assert filesystem_for(path).checksum(path) == checksum
