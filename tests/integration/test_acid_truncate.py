"""Truncating an insert-only table is an empty overwrite under a write id (Hive 4's way), and it replicates.

Readers are compared by the rows of their visible files: a snapshot taken before the truncate keeps its rows,
later ones see none, and the replica sees what the source sees after the next load (``repl verify`` agrees).
"""

from __future__ import annotations

import pytest

from hmsrepl.acid import InsertOnlyReader, visible_files
from hmsrepl.exceptions import InvalidObjectError, NoSuchPartitionError
from hmsrepl.metastore import Metastore
from hmsrepl.replication.dump_events import DumpEvent
from hmsrepl.replication.verify import capture_state, verify
from hmsrepl.storage.base import filesystem_for
from tests.helpers import make_table
from tests.integration.test_acid_replication import (  # noqa: F401 - fixtures
    bootstrap,
    engine,
    source,
    step,
    target,
    write,
)


def rows(store: Metastore, db: str, table: str, values: list[str] | None = None) -> list[bytes]:
    return _read(visible_files(store, db, table, values))


def _read(uris: list[str]) -> list[bytes]:
    out: list[bytes] = []
    for uri in uris:
        out.extend(filesystem_for(uri).open_read(uri).read().splitlines())
    return sorted(out)


def test_truncate_hides_rows_from_new_snapshots_only_and_the_replica_follows(engine, source, target) -> None:  # noqa: F811
    for n in range(3):
        write(source, "orders", f"order {n}".encode())
        write(source, "daily", f"day {n}".encode(), values=["d1"])
        write(source, "daily", f"day 2 {n}".encode(), values=["d2"])
    bootstrap(engine)
    assert rows(target, "sales_dr", "orders") == rows(source, "sales", "orders") != []
    old_snapshot = InsertOnlyReader(source, "sales", "orders")

    source.catalog.truncate_table("sales", "orders")
    before = source.get_current_notification_event_id()
    source.catalog.truncate_table("sales", "daily")  # every partition, in one txn under one write id

    commits = [e for e in source.events.next_events(before, 100) if e.event_type == "COMMIT_TXN"]
    assert len(commits) == 1
    [writes] = [DumpEvent.of(e).message.body.writes for e in commits]
    assert sorted(w.partition for w in writes) == ["day=d1", "day=d2"]
    assert len({w.write_id for w in writes}) == 1
    assert rows(source, "sales", "orders") == [] and rows(source, "sales", "daily", ["d1"]) == []
    assert rows(source, "sales", "daily", ["d2"]) == []
    assert _read(old_snapshot.files()) == [b"order 0", b"order 1", b"order 2"]  # its snapshot stays
    step(engine, None)
    assert rows(target, "sales_dr", "orders") == [] and rows(target, "sales_dr", "daily", ["d1"]) == []
    assert rows(target, "sales_dr", "daily", ["d2"]) == []
    assert verify(source, "sales", target, "sales_dr") == []

    write(source, "orders", b"after the truncate")
    step(engine, None)
    assert rows(target, "sales_dr", "orders") == [b"after the truncate"]
    assert verify(source, "sales", target, "sales_dr") == []


@pytest.mark.parametrize("backend", ["sqlite"])  # what the backend does here is tested elsewhere
def test_bad_truncates_of_transactional_tables_change_nothing(engine, source) -> None:  # noqa: F811
    source.catalog.create_table(
        make_table("sales", "full_acid", transactional="true", transactional_properties="default")
    )
    write(source, "daily", b"kept", values=["d1"])
    before = capture_state(source, "sales")
    with pytest.raises(NoSuchPartitionError, match="day=d9"):
        source.catalog.truncate_table("sales", "daily", ["day=d1", "day=d9"])
    with pytest.raises(InvalidObjectError, match="full ACID table"):
        source.catalog.truncate_table("sales", "full_acid")
    assert capture_state(source, "sales") == before
    assert rows(source, "sales", "daily", ["d1"]) == [b"kept"]
