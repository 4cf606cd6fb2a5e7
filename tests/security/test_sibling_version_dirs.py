"""Partitions at their level (a replica's version directories) are checked by equal keys, and stay exclusive.

A replica keeps each partition in a version directory beside its default place (``<table>/<name>.hmsrepl-vN``):
as many segments below the table as the partition has keys, so two such partitions overlap only when they are
the same directory, and the sibling check is an equality look-up on the indexed key (``metastore.placement``).
A source partition's value may itself spell a version mark (``p=a.hmsrepl-v3`` is ``p=a``'s version directory
at event 3): taking that directory must still be refused, with nothing changed, on the three backends; and
the per-table count the shortcut relies on must match the rows, counted in Python and in each backend's SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import event, select

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.locations import LOCATION_KEY_CHARS
from hmsrepl.metastore.model import Database, Partition, Table
from hmsrepl.metastore.placement import RECOUNT_ALL, Placement
from hmsrepl.metastore.schema import partitions, tbls
from tests.backends import metastore_on
from tests.helpers import make_partition, make_table, write_file
from tests.security.untouched import Untouched


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    yield from metastore_on(request, tmp_path)


def _at(table: Table, values: list[str] | str, location: str) -> Partition:
    part = make_partition(table, *([values] if isinstance(values, str) else values))
    return part.model_copy(update={"sd": part.sd.model_copy(update={"location": location})})


class Lookups:
    """Counts the sibling look-ups a piece of work sends: key ranges, and equal keys."""

    def __init__(self, store: Metastore) -> None:
        self.ranges = self.equal = 0
        self.engine = store.engine
        event.listen(self.engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: object, _cursor: object, statement: str, *_args: object) -> None:
        head, _, where = statement.partition("WHERE")
        if "partitions" not in head or "tbls" in head:
            return
        if "partitions.location_key >=" in where:
            self.ranges += 1
        elif any(f"partitions.location_key {equal}" in where for equal in ("IN", "= ANY", "= k.key")):
            self.equal += 1

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


def _counts(store: Metastore, name: str) -> tuple[int | None, int, int]:
    """(the table's kept count, the count by the Python rule over its rows, the count by the SQL rule)."""
    with store.engine.connect() as conn:
        row = conn.execute(
            select(tbls.c.tbl_id, tbls.c.location_key, tbls.c.odd_partitions).where(tbls.c.tbl_name == name)
        ).one()
        rows = conn.execute(
            select(partitions.c.part_name, partitions.c.location_key).where(partitions.c.tbl_id == row.tbl_id)
        ).all()
    python = Placement(row.location_key, None).count_odd((r.part_name, r.location_key) for r in rows)
    with store.engine.begin() as conn:
        conn.execute(RECOUNT_ALL)  # the migration's count, then put back
        sql = conn.execute(select(tbls.c.odd_partitions).where(tbls.c.tbl_id == row.tbl_id)).scalar_one()
        conn.execute(
            tbls.update().where(tbls.c.tbl_id == row.tbl_id).values(odd_partitions=row.odd_partitions)
        )
    return row.odd_partitions, python, sql


def _refused(store: Metastore, attack: Callable[[], object], *fragments: str) -> None:
    guarded: list[Path | str] = [store.config.warehouse, store.config.cmroot]
    before = Untouched.take(guarded, [store])
    with pytest.raises(InvalidObjectError) as info:
        attack()
    message = str(info.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    before.assert_same(guarded, [store])


def test_a_value_spelling_a_version_mark_cannot_take_a_version_directory(store: Metastore) -> None:
    c = store.catalog
    c.create_database(Database(name="shop"))
    table = c.create_table(make_table("shop", "t", partition_keys=("p",)))
    root = table.sd.location or ""
    lookups = Lookups(store)
    try:
        [a] = c.add_partitions("shop", "t", [_at(table, "a", f"{root}/p=a.hmsrepl-v3")])
        c.add_partitions("shop", "t", [_at(table, "b", f"{root}/p=b.hmsrepl-v3-1")])
        write_file(a.sd.location or "", "000000_0", b"a's rows")
        c.insert("shop", "t", ["a"])
        assert _counts(store, "t") == (0, 0, 0)  # version directories are at their level
        assert lookups.ranges == 0 and lookups.equal >= 2
        # p=a.hmsrepl-v3's default place is p=a's version directory: added, or moved there, or both in a batch
        _refused(
            store,
            lambda: c.add_partitions("shop", "t", [make_partition(table, "a.hmsrepl-v3")]),
            "'shop.t/p=a.hmsrepl-v3'",
            "is the location of partition 'shop.t/p=a'",
        )
        [b] = c.get_partitions_by_names("shop", "t", ["p=b"])
        onto = b.model_copy(update={"sd": b.sd.model_copy(update={"location": a.sd.location})})
        _refused(store, lambda: c.alter_partitions("shop", "t", [onto]), "is the location of partition")
        _refused(
            store,
            lambda: c.add_partitions(
                "shop",
                "t",
                [_at(table, "c", f"{root}/p=c.hmsrepl-v4"), make_partition(table, "c.hmsrepl-v4")],
            ),
            "is the location of partition 'shop.t/p=c'",
        )
        assert lookups.ranges == 0  # every one refused by equal keys
        # the value itself is a name like any other: at a directory of its own it is accepted
        c.add_partitions("shop", "t", [_at(table, "a.hmsrepl-v3", f"{root}/p=a.hmsrepl-v3.hmsrepl-v5")])
        assert _counts(store, "t") == (0, 0, 0)
        c.drop_partitions("shop", "t", [["a.hmsrepl-v3"]], delete_data=True)
        assert Path(a.sd.location or "", "000000_0").read_bytes() == b"a's rows"
    finally:
        lookups.close()


def test_odd_partitions_bring_the_range_check_back(store: Metastore) -> None:
    """A partition deeper or shallower than its level counts as odd; then ranges are looked up again, and
    they refuse a version directory inside another partition's."""
    c = store.catalog
    c.create_database(Database(name="shop"))
    table = c.create_table(make_table("shop", "t", partition_keys=("p",)))
    root = table.sd.location or ""
    c.add_partitions("shop", "t", [_at(table, "a", f"{root}/p=a.hmsrepl-v3")])
    c.add_partitions("shop", "t", [_at(table, "deep", f"{root}/p=z.hmsrepl-v3/inner")])
    assert _counts(store, "t") == (1, 1, 1)
    lookups = Lookups(store)
    try:
        _refused(
            store,
            lambda: c.add_partitions("shop", "t", [_at(table, "z", f"{root}/p=z.hmsrepl-v3")]),
            "holds the location of partition 'shop.t/p=deep'",
        )
        assert lookups.ranges >= 1
    finally:
        lookups.close()
    c.drop_partitions("shop", "t", [["deep"]], delete_data=False)
    assert _counts(store, "t") == (0, 0, 0)


def test_the_count_is_the_same_in_python_and_in_each_backends_sql(store: Metastore) -> None:
    """Several keys, non-ASCII names (bytes are not characters on MariaDB), keys cut at their stored
    length, a table moved: the kept count, the Python rule and the SQL rule agree after each write."""
    c = store.catalog
    c.create_database(Database(name="shop"))
    two = c.create_table(make_table("shop", "t2", partition_keys=("y", "m")))
    root = two.sd.location or ""
    long_value = "v" * LOCATION_KEY_CHARS
    cases = [
        (["2024", "01"], None),  # the default place: two segments
        (["2024", "02"], f"{root}/y=2024/m=02.hmsrepl-v7"),  # a version directory: at its level
        (["2024", "ü"], f"{root}/y=2024.hmsrepl-v7/m=ü.hmsrepl-v7"),  # non-ASCII, at its level
        (["2024", "03"], f"{root}/y=2024-m=03"),  # one segment for two keys: odd
        (["2024", "04"], f"{root}/y=2024/m=04/x"),  # three segments: odd
        (["2024", "05"], f"{root}/y=2024/m={long_value}"),  # a key cut at its stored length: odd
    ]
    for values, location in cases:
        part = make_partition(two, *values) if location is None else _at(two, values, location)
        c.add_partitions("shop", "t2", [part])
        kept, python, sql = _counts(store, "t2")
        assert kept == python == sql, (values, kept, python, sql)
    assert _counts(store, "t2") == (3, 3, 3)
    [moved] = c.get_partitions_by_names("shop", "t2", ["y=2024/m=03"])
    back = moved.model_copy(update={"sd": moved.sd.model_copy(update={"location": f"{root}/a/b.hmsrepl-v9"})})
    c.alter_partitions("shop", "t2", [back])
    assert _counts(store, "t2") == (2, 2, 2)
    current = c.get_table("shop", "t2")
    c.alter_table(
        "shop",
        "t2",
        current.model_copy(update={"sd": current.sd.model_copy(update={"location": f"{root}/y=2024"})}),
    )
    kept, python, sql = _counts(store, "t2")
    assert kept == python == sql, (kept, python, sql)
    c.drop_partitions("shop", "t2", [["2024", "04"], ["2024", "ü"]], delete_data=False)
    kept, python, sql = _counts(store, "t2")
    assert kept == python == sql, (kept, python, sql)
