"""A bootstrap dump reads a group of tables' partitions in one keyset scan, handed out table by table.

Each table must get exactly its own partitions, in name order, however pages cut through its rows, and a
table whose pages the caller leaves unread must not shift what the next table gets.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hmsrepl.metastore import Metastore, bulk_reads
from hmsrepl.metastore.model import Database
from tests.helpers import make_partition, make_table

SIZES = {"a": 3, "b": 0, "c": 7, "d": 1, "e": 5}  # partitions per table; ``b`` unpartitioned


@pytest.fixture
def store(sqlite_metastore: Metastore) -> Iterator[Metastore]:
    sqlite_metastore.catalog.create_database(Database(name="s"))
    for name, count in SIZES.items():
        table = make_table("s", name, partition_keys=("p",) if count else ())
        sqlite_metastore.catalog.create_table(table)
        if count:
            parts = [make_partition(table, f"v{i:02d}") for i in range(count)]
            sqlite_metastore.catalog.add_partitions("s", name, parts)
    yield sqlite_metastore


@pytest.mark.parametrize("page_rows", [1, 2, 4, 5_000])
def test_each_table_gets_its_own_partitions_across_pages(
    store: Metastore, page_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk_reads, "PAGE_ROWS", page_rows)
    got = {
        name: [part.values[0] for page in pages for part in page]
        for name, _table, pages in bulk_reads.table_pages(store.events, "s", list(SIZES))
    }
    assert got == {name: [f"v{i:02d}" for i in range(count)] for name, count in SIZES.items()}


@pytest.mark.parametrize("page_rows", [1, 2, 4, 5_000])
def test_a_table_left_unread_does_not_shift_the_next(
    store: Metastore, page_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk_reads, "PAGE_ROWS", page_rows)
    got = {}
    for name, _table, pages in bulk_reads.table_pages(store.events, "s", list(SIZES)):
        if name in ("a", "c"):
            continue  # pages left unread
        got[name] = [part.values[0] for page in pages for part in page]
    assert got == {"b": [], "d": ["v00"], "e": [f"v{i:02d}" for i in range(5)]}
