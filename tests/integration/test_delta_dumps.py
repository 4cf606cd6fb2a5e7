"""Format-2 delta events through real dumps: every dumped listing is exactly the source's at that event id.

Random appends, removals and overwrites of files in two partitions are made on disk and logged as format-2
events (``MessageBuilder`` with a ``DataChange`` computed by a reference model of each partition's listing:
relative path -> encoded URI), interleaved with metadata-only ALTERs. Then:

- incremental dumps from any boundary, in LIMIT-sized batches (compacted, as dumps are by default, or not), are
  replayed the way a load replays them (``DataChange.apply`` onto the replica's listing, ``DataChange.check``
  after each change): after each dump the replica's listing is the model's at the dump's last event id, and
  each event's ``_files`` names exactly what its message adds;
- a bootstrap dump taken while writes go on (after its first table is read, before the second is) holds, after
  consolidation, each partition's listing as of the dump's last event id.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from hmsrepl.formats import listing_digest
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse
from hmsrepl.metastore.events import EventType, PendingEvent
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.messages import DataChange, MessageBuilder, checksum_of, relative_path
from hmsrepl.metastore.model import Database
from hmsrepl.replication.commands import DumpCommand, parse_command
from hmsrepl.replication.dump import DumpEngine
from hmsrepl.replication.layout import DumpDir
from tests.dump_events import read_events
from tests.helpers import dumped_partitions, make_partition, make_table, open_store, write_file

TABLES = ("t", "u")
Listing = dict[str, str]
# (table index, op, n): op 0 appends (or rewrites) file f<n>, 1 removes a file, 2 overwrites the partition
# with one file, 3 alters the partition's metadata only.
Op = tuple[int, int, int]
ops_strategy = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 3), st.integers(0, 5)), max_size=18)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Metastore, Path]]:
    root = tmp_path_factory.mktemp("deltas")
    store = open_store(root, "source")
    yield store, root / "dumps"
    store.close()


class Writer:
    """Makes the model's changes on disk and logs them as format-2 events; remembers every listing."""

    def __init__(self, store: Metastore, db: str) -> None:
        self.store, self.db = store, db
        self.catalog = store.catalog
        self.catalog.create_database(Database(name=db))
        self.listings: dict[str, Listing] = {}
        for name in TABLES:
            table = self.catalog.create_table(make_table(db, name, partition_keys=("p",)))
            self.catalog.add_partitions(db, name, [make_partition(table, "1")])
            self.listings[name] = {}
        self.at: dict[int, dict[str, Listing]] = {}  # event id -> every partition's listing after it
        self.steps = itertools.count()
        self.at[store.get_current_notification_event_id()] = self.snapshot()

    def snapshot(self) -> dict[str, Listing]:
        return {name: dict(listing) for name, listing in self.listings.items()}

    def apply(self, ops: list[Op]) -> None:
        for table_index, op, n in ops:
            self.one(TABLES[table_index], op, n)

    def one(self, name: str, op: int, n: int) -> None:
        table = self.catalog.get_table(self.db, name)
        part = self.catalog.get_partition(self.db, name, ["1"])
        location = part.sd.location or ""
        listing = self.listings[name]
        step = next(self.steps)
        change: DataChange | None
        if op == 0:
            change = DataChange(added=(self.write(location, f"f{n}", step),))
        elif op == 1 and listing:
            gone = sorted(listing)[n % len(listing)]
            os.remove(os.path.join(location, gone))
            change = DataChange(removed=(gone,))
        elif op == 2:
            for rel in listing:
                os.remove(os.path.join(location, rel))
            change = DataChange(added=(self.write(location, f"f{n}", step),), complete=True)
        else:
            change = None
        if change is not None:
            self.listings[name] = after = change.apply(listing)
            digest = listing_digest.of((rel, checksum_of(enc)) for rel, enc in after.items())
            change = replace(change, count=len(after), digest=digest)
        snapshots = {"table": table.model_dump(mode="json"), "partition": part.model_dump(mode="json")}
        if op in (0, 2):
            kind, body = EventType.INSERT, MessageBuilder(snapshots).with_data(change)
        else:
            altered = {"table": snapshots["table"], "before": snapshots["partition"]}
            altered["after"] = {**snapshots["partition"], "parameters": {"step": str(step)}}
            kind, body = EventType.ALTER_PARTITION, MessageBuilder(altered).with_data(change)
        [event_id] = self.store.events.append([PendingEvent(kind, self.db, name, body)])
        self.at[event_id] = self.snapshot()

    def write(self, location: str, name: str, step: int) -> str:
        uri = write_file(location, name, f"step {step}".encode())
        [encoded] = [e for e in describe_files(location, self.store.cm) if relative_path(e) == name]
        assert uri in encoded
        return encoded


def dump_command(text: str) -> DumpCommand:
    command = parse_command(text)
    assert isinstance(command, DumpCommand)
    return command


_examples = itertools.count()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops_strategy, start=st.integers(0, 30), limit=st.integers(1, 6), compacting=st.booleans())
def test_incremental_delta_dumps_from_any_boundary_rebuild_each_listing(
    source, ops, start, limit, compacting
) -> None:
    store, dumps = source
    db = f"inc{next(_examples)}"
    writer = Writer(store, db)
    writer.apply(ops)
    ids = sorted(writer.at)
    position = ids[min(start, len(ids) - 1)]  # where the replica stands: any event id of the window
    replica = {name: dict(listing) for name, listing in writer.at[position].items()}
    engine = DumpEngine(store, str(dumps))
    current = store.get_current_notification_event_id()
    while position < current:
        settings = "" if compacting else " WITH ('hmsrepl.repl.compact.events'='false')"
        dumped = engine.dump(dump_command(f"REPL DUMP {db} FROM {position} LIMIT {limit}{settings}"))
        for doc in read_events(dumped.dump_dir):
            message = parse(doc["event_type"], doc["message"], doc["db"], doc["table"])
            assert doc["files"] == message.files()
            for obj in message.objects():
                replica[doc["table"]] = obj.change.apply(replica[doc["table"]])
                obj.change.check(replica[doc["table"]], f"{doc['table']} at event {doc['event_id']}")
        assert dumped.last_event_id > position
        position = dumped.last_event_id
        assert replica == writer.at[position]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=ops_strategy, during=ops_strategy)
def test_bootstrap_consolidates_deltas_made_while_it_reads(source, before, during) -> None:
    store, dumps = source
    db = f"boot{next(_examples)}"
    writer = Writer(store, db)
    writer.apply(before)
    pending = [during]

    def after_table(name: str) -> None:  # t is read before these writes, u after them
        if pending:
            writer.apply(pending.pop())

    dumped = DumpEngine(store, str(dumps), on_table_dumped=after_table).dump(dump_command(f"REPL DUMP {db}"))
    dump = DumpDir(dumped.dump_dir)
    assert dumped.last_event_id == store.get_current_notification_event_id()
    for name in TABLES:
        files = dumped_partitions(dump.uri, db, name)["p=1"][1] or []
        assert {relative_path(e): e for e in files} == writer.listings[name], name
