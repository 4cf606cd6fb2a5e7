"""The sibling check's shortcut stays exact: no stored look-up only while every partition is at its default place.

A table whose partitions all sit at ``<table>/<name>`` skips the look-up of stored partitions when new ones
do too (``metastore.placement``). These tests plant the cases the shortcut must not miss, a custom partition
inside another's default directory added before and after it, one left behind by a table moved below it,
and check that the per-table count it relies on matches the stored rows after every kind of write, on the
three backends.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event, select

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Table
from hmsrepl.metastore.placement import RECOUNT_ALL, Placement
from hmsrepl.metastore.schema import partitions, tbls
from tests.backends import metastore_on
from tests.helpers import make_partition, make_table, partition_at


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    yield from metastore_on(request, tmp_path)


@pytest.fixture
def table(store: Metastore) -> Table:
    store.catalog.create_database(Database(name="shop"))
    return store.catalog.create_table(make_table("shop", "t", partition_keys=("p",)))


def _stored_odd(store: Metastore, name: str = "t") -> tuple[int | None, int]:
    """(the table's kept count, the count recomputed from its rows in Python)."""
    with store.engine.connect() as conn:
        row = conn.execute(
            select(tbls.c.tbl_id, tbls.c.location_key, tbls.c.odd_partitions)
            .where(tbls.c.tbl_id.is_not(None))
            .where(tbls.c.tbl_name == name)
        ).one()
        rows = conn.execute(
            select(partitions.c.part_name, partitions.c.location_key).where(partitions.c.tbl_id == row.tbl_id)
        ).all()
    placed = Placement(row.location_key, None)  # the rule the catalog applies in Python
    return row.odd_partitions, placed.count_odd((r.part_name, r.location_key) for r in rows)


class SiblingQueries:
    """Counts the look-ups of stored siblings (the ranges of partition lookup keys) a piece of work sends."""

    def __init__(self, store: Metastore) -> None:
        self.count = 0
        self.engine = store.engine
        event.listen(self.engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "partitions.location_key >=" in statement and "tbls" not in statement.split("WHERE")[0]:
            self.count += 1

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


def test_custom_partition_inside_a_default_directory_is_refused_before_and_after(
    store: Metastore, table: Table
) -> None:
    c = store.catalog
    root = table.sd.location
    c.add_partitions("shop", "t", [make_partition(table, "a")])
    assert _stored_odd(store) == (0, 0)
    with pytest.raises(InvalidObjectError, match=r"lies inside the location of partition 'shop\.t/p=a'"):
        c.add_partitions("shop", "t", [partition_at(table, "x", f"{root}/p=a/inner")])  # added after p=a
    c.add_partitions("shop", "t", [partition_at(table, "y", f"{root}/p=b/inner")])  # before p=b: allowed then
    assert _stored_odd(store) == (1, 1)
    with pytest.raises(InvalidObjectError, match=r"holds the location of partition 'shop\.t/p=y'"):
        c.add_partitions("shop", "t", [make_partition(table, "b")])  # p=b's default directory holds p=y
    c.drop_partitions("shop", "t", [["y"]], delete_data=False)
    assert _stored_odd(store) == (0, 0)
    c.add_partitions("shop", "t", [make_partition(table, "b")])  # nothing odd left: accepted
    assert sorted(c.get_partition_names("shop", "t")) == ["p=a", "p=b"]


def test_default_partitions_are_checked_without_a_look_up_and_an_altered_one_brings_it_back(
    store: Metastore, table: Table
) -> None:
    c = store.catalog
    root = table.sd.location
    queries = SiblingQueries(store)
    try:
        c.add_partitions("shop", "t", [make_partition(table, str(n)) for n in range(5)])
        c.add_partitions("shop", "t", [make_partition(table, str(n)) for n in range(5, 10)])
        assert queries.count == 0
        [moved] = c.get_partitions_by_names("shop", "t", ["p=1"])
        away = moved.model_copy(update={"sd": moved.sd.model_copy(update={"location": f"{root}/p=c/deep"})})
        c.alter_partitions("shop", "t", [away])
        assert _stored_odd(store) == (1, 1)
        with pytest.raises(InvalidObjectError, match=r"holds the location of partition 'shop\.t/p=1'"):
            c.add_partitions("shop", "t", [make_partition(table, "c")])
        assert queries.count >= 1
        back = moved.model_copy(update={"sd": moved.sd.model_copy(update={"location": f"{root}/p=1"})})
        c.alter_partitions("shop", "t", [back])
        assert _stored_odd(store) == (0, 0)
        queries.count = 0
        c.add_partitions("shop", "t", [make_partition(table, "c")])
        assert queries.count == 0
    finally:
        queries.close()


def test_a_table_moved_below_its_own_partition_counts_its_partitions_again(
    store: Metastore, table: Table
) -> None:
    """The default places follow the table: after it moves into p=a's directory, p=a holds the default
    place of any new partition, and the count must say so (else the shortcut would accept p=q there)."""
    c = store.catalog
    root = table.sd.location or ""
    c.add_partitions("shop", "t", [make_partition(table, "a")])
    current = c.get_table("shop", "t")
    moved = current.model_copy(
        update={"sd": current.sd.model_copy(update={"location": f"{root}/p=a/nested"})}
    )
    c.alter_table("shop", "t", moved)
    assert _stored_odd(store) == (1, 1)
    with pytest.raises(InvalidObjectError, match=r"lies inside the location of partition 'shop\.t/p=a'"):
        c.add_partitions("shop", "t", [make_partition(table, "q")])
    renamed = c.get_table("shop", "t").model_copy(update={"table_name": "u"})
    c.alter_table("shop", "t", renamed)
    assert _stored_odd(store, "u") == (1, 1)


def test_random_writes_keep_the_count_exact_and_the_migration_counts_the_same(
    sqlite_metastore: Metastore,
) -> None:
    """Backend-independent bookkeeping (the count's SQL runs on each backend in the tests above)."""
    store = sqlite_metastore
    c = store.catalog
    c.create_database(Database(name="shop"))
    table = c.create_table(make_table("shop", "t", partition_keys=("p",)))
    root = table.sd.location
    rng = random.Random(34)
    present: set[str] = set()
    for step in range(60):
        value = str(rng.randrange(12))
        name = f"p={value}"
        custom = partition_at(table, value, f"{root}/custom/{step}/{value}")
        try:
            if name not in present:
                c.add_partitions(
                    "shop", "t", [custom if rng.random() < 0.3 else make_partition(table, value)]
                )
                present.add(name)
            elif rng.random() < 0.5:
                [part] = c.get_partitions_by_names("shop", "t", [name])
                where = custom.sd.location if rng.random() < 0.5 else f"{root}/{name}"
                c.alter_partitions(
                    "shop",
                    "t",
                    [part.model_copy(update={"sd": part.sd.model_copy(update={"location": where})})],
                )
            else:
                c.drop_partitions("shop", "t", [[value]], delete_data=False)
                present.discard(name)
        except InvalidObjectError:
            pass
        kept, counted = _stored_odd(store)
        assert kept == counted, (step, kept, counted)
    with store.engine.begin() as conn:
        conn.execute(tbls.update().values(odd_partitions=None))
        conn.execute(RECOUNT_ALL)
    kept, counted = _stored_odd(store)
    assert kept == counted
