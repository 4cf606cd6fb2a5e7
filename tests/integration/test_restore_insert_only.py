"""Reverting an insert-only transactional table to a write id: readers then see exactly the rows a reader
saw as of that write id, the revert commits as an ordinary overwrite transaction that a replica replays, and
bad requests are refused with one line before anything changes."""

from __future__ import annotations

import pytest

from hmsrepl.acid import InsertOnlyWriter, visible_files
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from hmsrepl.restore.errors import RestoreError
from hmsrepl.restore.service import RestoreRequest, run_restore
from tests.integration.test_insert_only import append, create_table, put, rows_of
from tests.integration.test_restore import metadata_hash


def seed(store: Metastore) -> int:
    """Two appends to ``sales.events`` and one to partition ds=1 of ``sales.daily``; returns the write id
    of the table's second append."""
    store.catalog.create_database(Database(name="sales"))
    create_table(store, "events")
    create_table(store, "daily", partition_keys=("ds",))
    append(store, "events", ["a", "b"])
    append(store, "events", ["c"])
    append(store, "daily", ["d1"], ["1"])
    return 2


def test_revert_to_a_write_id_undoes_an_overwrite_and_a_replica_follows(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    good = seed(source)
    before = rows_of(visible_files(source, "sales", "events"))
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    with InsertOnlyWriter(source, "sales", "events", mode="overwrite") as writer:  # the accident
        put(writer.target_uri, "part-00000", ["bad"])
    append(source, "events", ["after the accident"])
    assert rows_of(visible_files(source, "sales", "events")) == ["after the accident", "bad"]

    preview, _ = run_restore(source, RestoreRequest("revert", "sales.events", write_id=good, preview=True))
    assert "overwrite table 'sales.events': 2 files visible as of write id 2 (now 2)" in preview.text()
    _, result = run_restore(source, RestoreRequest("revert", "sales.events", write_id=good))
    assert result is not None and result.files == 2
    assert rows_of(visible_files(source, "sales", "events")) == before
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert verify(source, "sales", target, "sales_dr") == []
    assert rows_of(visible_files(target, "sales_dr", "events")) == before


def test_bad_write_id_requests_are_refused_and_change_nothing(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    log = metadata_hash(store)
    for request, message in (
        (
            RestoreRequest("revert", "sales.events", write_id=9),
            "write id 9 of table 'sales.events' is not between",
        ),
        (RestoreRequest("revert", "sales.events", write_id=1, event=3), "needs exactly one of --event ID"),
        (RestoreRequest("revert", "sales.events", write_id=1, into="copy"), "it takes no --into"),
        (RestoreRequest("table", "sales.events", write_id=1), "--write-id goes with 'revert'"),
        (RestoreRequest("revert", "sales.daily", write_id=1, partitions=("ds=7",)), "partition 'ds=7'"),
        (RestoreRequest("revert", "sales.events", event=3), "revert an insert-only table in place with"),
    ):
        with pytest.raises(RestoreError, match=message):
            run_restore(store, request)
    assert metadata_hash(store) == log
