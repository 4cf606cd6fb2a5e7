"""Readers of a replica see only states the source had, while loads apply a randomised workload.

The source runs random operations (creates, drops, renames, partition adds and drops, inserts, overwrites,
more one-file appends than the rest); after every change that logs an event the test records every policy
table's state (its files' contents per partition, or None if the table does not exist). Loads replicate the
history in small random windows (``FROM a TO b``, some cut short by a ``LIMIT``, so a window can end inside
an operation) into a replica on PostgreSQL, with event compaction on (the default: a window's events that a
later one makes redundant are left out) or off, while a reader thread reads replica tables in a loop the way
a query engine does: the table's metadata through the catalog API, then its partitions, then lists and
reads the files of each location. Every read must equal the state the source's same table had at some
event id between the replica's positions read just before and just after: nothing mixed (half an
overwrite, one partition new and another old), nothing ahead of or behind the committed position, nothing
vanished, and with compaction no table missing or older than at that position (holds.py). One exception,
and only that one: a batch whose changes to a table are one-file appends publishes them by renaming the
files into place right after the batch commits, in the order the source wrote them, so in that moment a
reader may still see the table as at a position between the previous committed one and the new one, short
only of files the batch added.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.replication import replica_versions as target_module
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.leftovers import RETIRE_GRACE_ENV
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from tests.backends import temporary_database
from tests.compaction_workload import TABLES, apply_ops, create_database, policy_text, random_ops
from tests.helpers import open_replica, open_sqlite_source
from tests.replica_states import CommitLog, History, table_state

GRACE_SECONDS = 1.0
NO_COMPACTION = " WITH ('hmsrepl.repl.compact.events'='false')"
MIN_READS = 1000
MIN_LOADS = 60
MAX_OPERATIONS = 2000
# One-file appends (inserts) weigh most: they are what a load adds in place, in a commit of their own.
WEIGHTS = (2, 1.5, 1.5, 2, 1, 1.5, 4, 2, 1)


def only_files_added(before: object, after: object) -> bool:
    """``after`` is ``before`` with more files in some objects (the table, or some of its partitions) and
    nothing else changed."""
    if before is None or after is None or before[0] != after[0] or before == after:  # type: ignore[index]
        return False
    if before[0] == "plain":  # type: ignore[index]
        return before[1] < after[1]  # type: ignore[index,operator]
    old_parts, new_parts = dict(before[1]), dict(after[1])  # type: ignore[index]
    return old_parts.keys() == new_parts.keys() and all(old_parts[n] <= new_parts[n] for n in old_parts)


@pytest.fixture
def replica(tmp_path: Path) -> Iterator[Metastore]:
    with temporary_database("postgres", str(tmp_path)) as url:
        store = open_replica(url, tmp_path)
        yield store
        store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("options", ["", NO_COMPACTION], ids=["compacted", "full"])
def test_readers_see_only_source_states_during_loads(
    tmp_path: Path, replica: Metastore, monkeypatch: pytest.MonkeyPatch, options: str
) -> None:
    monkeypatch.setenv(RETIRE_GRACE_ENV, str(GRACE_SECONDS))
    # Appends of several files build their versions from standbys here too (the tables are small).
    monkeypatch.setenv(target_module.STANDBY_MIN_FILES_ENV, "1")
    # Slow storage: publishing copied files takes a while (renames on S3 are copies), so a load that
    # changed directories readers list before its metadata commits would be caught in the act.
    publish_all = target_module.publish_all

    def slow_publish_all(*args: object, **kwargs: object) -> None:
        time.sleep(0.03)
        publish_all(*args, **kwargs)
        time.sleep(0.03)

    monkeypatch.setattr(target_module, "publish_all", slow_publish_all)
    seed = int(os.environ.get("HMSREPL_ATOMIC_READS_SEED", "7"))
    rng = random.Random(seed)
    source = open_sqlite_source(tmp_path)
    db, target_db = "rdb", "rdb_dr"
    policy = policy_text(db)
    create_database(source, db)
    apply_ops(source, db, random_ops(rng, 20), tag="b", payload=512)
    history = History(source, db, TABLES)  # each table's state at every event id from here on
    history.record()
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, replica)
    bootstrap = engine.execute(f"REPL DUMP {policy}")
    engine.execute(f"REPL LOAD {target_db} FROM '{bootstrap.dump_dir}'")
    loading = threading.Event()
    loading.set()
    reads: list[tuple[str, object, float, int, int]] = []
    errors: list[str] = []

    def reader() -> None:
        reader_rng = random.Random(11)
        while loading.is_set():
            name = reader_rng.choice(TABLES)
            started = time.monotonic()
            try:
                before = repl_status(replica, target_db) or 0
                first_id, state = table_state(replica, target_db, name)
                second_id = replica.catalog.get_table(target_db, name).id if first_id is not None else None
            except NoSuchObjectError:
                continue  # dropped between the two reads
            except Exception as exc:  # a location that vanished under the reader is a violation too
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            if first_id != second_id:
                continue  # the table was dropped or replaced between the two reads: no single snapshot
            after = repl_status(replica, target_db) or 0
            reads.append((name, state, time.monotonic() - started, before, after))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    loads = 0
    load_ends = [bootstrap.last_event_id]
    window_rng = random.Random(seed * 31 + 3)
    commits = CommitLog(replica, target_db, TABLES)  # every commit's whole state, read right after it
    try:
        position = bootstrap.last_event_id
        for step in range(MAX_OPERATIONS):  # the history, one operation at a time, replicated in windows
            ops = random_ops(rng, 1, WEIGHTS)
            apply_ops(source, db, ops, tag=f"h{step}-", payload=512, on_event=history.record)
            end = source.events.current_event_id()
            if window_rng.random() < 0.85 or end == position:  # windows of 1 to about 20 operations
                continue
            cut = f" LIMIT {window_rng.randint(1, 8)}" if window_rng.random() < 0.3 else ""
            dumped = engine.execute(f"REPL DUMP {policy} FROM {position} TO {end}{cut}{options}")
            with commits.watching(monkeypatch):
                engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")
            position, loads = dumped.last_event_id, loads + 1
            load_ends.append(position)
            if len(reads) >= MIN_READS * 1.2 and loads >= MIN_LOADS:
                break
    finally:
        loading.clear()
        thread.join(timeout=30)
    dumped = engine.execute(f"REPL DUMP {policy} FROM {position}")
    engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")
    fair = [read for read in reads if read[2] < GRACE_SECONDS]

    # A read between two readings of the position must show the table as the source had it at a replicated
    # position in that range: not merely some state the table ever had (it was empty once, for instance).
    def publishing(name: str, state: object, before: int) -> bool:
        """The table as at a position of the batch just committed while its added files are renamed."""
        earlier = max((end for end in load_ends if end < before), default=None)
        now = history.at(before)
        return (
            earlier is not None
            and now is not None
            and state in [tables[name] for tables in history.between(earlier, before)]
            and only_files_added(state, now[name])
        )

    def seen_by_source(name: str, state: object, before: int, after: int) -> bool:
        return state in [tables[name] for tables in history.between(before, after)]

    violations = [
        (name, state, before, after)
        for name, state, _, before, after in fair
        if not seen_by_source(name, state, before, after) and not publishing(name, state, before)
    ]
    lagging = sum(
        1 for name, state, _, before, after in fair if not seen_by_source(name, state, before, after)
    )
    foreign = commits.foreign(history)
    print(
        f"{len(reads)} reads during {loads} loads, {len(violations)} violations, {lagging} reads between a "
        f"commit and its rename, errors {len(errors)}; {len(commits.seen)} commits, {len(foreign)} showing a "
        "state the source never had at their position"
    )
    assert len(fair) >= MIN_READS, f"only {len(fair)} reads completed within the grace period"
    assert len(fair) >= 0.95 * len(reads)
    assert errors == []
    assert violations == []
    assert foreign == []
    assert verify(source, db, replica, target_db, parse_policy(policy)) == []
    source.close()
