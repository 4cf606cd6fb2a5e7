"""Readers of a replica see only states the source had, while loads apply a randomised workload.

The source runs random operations (creates, drops, renames, partition adds and drops, inserts, overwrites);
after each one the test records every policy table's state (its files' contents per partition, or None if
the table does not exist). Loads replicate the history in small windows (``FROM a TO b`` at operation
boundaries, so every replicated position is a recorded one) into a replica on PostgreSQL, while a reader thread reads replica tables in a loop the way a
query engine does: the table's metadata through the catalog API, then its partitions, then lists and reads
the files of each location. Every read must equal the state the source's same table had at some recorded
point: nothing mixed (half an overwrite, one partition new and another old), nothing vanished.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import list_data_files
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.leftovers import RETIRE_GRACE_ENV
from hmsrepl.replication.verify import verify
from hmsrepl.storage.base import filesystem_for, relative_to
from tests.backends import temporary_database
from tests.compaction_workload import TABLES, apply_ops, create_database, policy_text, random_ops
from tests.helpers import open_replica, open_sqlite_source

GRACE_SECONDS = 1.0
MIN_READS = 1000
MAX_OPERATIONS = 2000


def _files(location: str | None) -> frozenset[tuple[str, bytes]]:
    if not location:
        return frozenset()
    fs = filesystem_for(location)
    out = []
    for status in list_data_files(location):
        with fs.open_read(status.uri) as stream:
            out.append((relative_to(status.uri, location), stream.read()))
    return frozenset(out)


def table_state(store: Metastore, db: str, name: str) -> tuple[int | None, object]:
    """(table id, state): None if missing; else its files, or each partition's files, by content."""
    try:
        table = store.catalog.get_table(db, name)
    except NoSuchObjectError:
        return None, None
    if table.partition_keys:
        parts = store.catalog.get_partitions(db, name)
        keys = table.partition_key_names
        return table.id, (
            "partitioned",
            frozenset((make_partition_name(keys, p.values), _files(p.sd.location)) for p in parts),
        )
    return table.id, ("plain", _files(table.sd.location))


@pytest.fixture
def replica(tmp_path: Path) -> Iterator[Metastore]:
    with temporary_database("postgres", str(tmp_path)) as url:
        store = open_replica(url, tmp_path)
        yield store
        store.close()


@pytest.mark.postgres
def test_readers_see_only_source_states_during_loads(
    tmp_path: Path, replica: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RETIRE_GRACE_ENV, str(GRACE_SECONDS))
    rng = random.Random(7)
    source = open_sqlite_source(tmp_path)
    db, target_db = "rdb", "rdb_dr"
    policy = policy_text(db)
    create_database(source, db)
    apply_ops(source, db, random_ops(rng, 20), tag="b", payload=512)
    valid: dict[str, set[object]] = {name: set() for name in TABLES}

    def record() -> None:
        for name in TABLES:
            valid[name].add(table_state(source, db, name)[1])

    record()
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, replica)
    bootstrap = engine.execute(f"REPL DUMP {policy}")
    engine.execute(f"REPL LOAD {target_db} FROM '{bootstrap.dump_dir}'")
    loading = threading.Event()
    loading.set()
    reads: list[tuple[str, object, float]] = []
    errors: list[str] = []

    def reader() -> None:
        reader_rng = random.Random(11)
        while loading.is_set():
            name = reader_rng.choice(TABLES)
            started = time.monotonic()
            try:
                first_id, state = table_state(replica, target_db, name)
                second_id = replica.catalog.get_table(target_db, name).id if first_id is not None else None
            except NoSuchObjectError:
                continue  # dropped between the two reads
            except Exception as exc:  # a location that vanished under the reader is a violation too
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            if first_id != second_id:
                continue  # the table was dropped or replaced between the two reads: no single snapshot
            reads.append((name, state, time.monotonic() - started))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    loads = 0
    try:
        position = bootstrap.last_event_id
        for step in range(MAX_OPERATIONS):  # the history, one operation at a time, replicated in windows
            apply_ops(source, db, random_ops(rng, 1), tag=f"h{step}-", payload=512)
            record()
            end = source.events.current_event_id()
            if step % 2 == 0 or end == position:
                continue
            dumped = engine.execute(f"REPL DUMP {policy} FROM {position} TO {end}")
            engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")
            position, loads = end, loads + 1
            if len(reads) >= MIN_READS * 1.2:
                break
    finally:
        loading.clear()
        thread.join(timeout=30)
    dumped = engine.execute(f"REPL DUMP {policy} FROM {position}")
    engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")
    fair = [(name, state) for name, state, seconds in reads if seconds < GRACE_SECONDS]
    violations = [(name, state) for name, state in fair if state not in valid[name]]
    print(f"{len(reads)} reads during {loads} loads, {len(violations)} violations, errors {len(errors)}")
    assert len(fair) >= MIN_READS, f"only {len(fair)} reads completed within the grace period"
    assert len(fair) >= 0.95 * len(reads)
    assert errors == []
    assert violations == []
    assert verify(source, db, replica, target_db, parse_policy(policy)) == []
    source.close()
