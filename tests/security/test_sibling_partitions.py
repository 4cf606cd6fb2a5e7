"""A managed partition may not take, hold or sit inside another partition's directory of its table.

Otherwise ``drop_partition(p=a, deleteData=true)`` recycles p=b's files (into cmroot) and leaves p=b
pointing at a missing directory. Each attack, by ``add_partitions`` or ``alter_partitions`` (plain, or
declared as Hive's loadPartition does before its INSERT), must be refused with a one-line error naming both
partitions, change no file (hashed) or row, and log no event; the victim's data then survives a drop of the
attacker's partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Partition, Table
from hmsrepl.storage.local import local_path
from tests.backends import metastore_on
from tests.helpers import make_partition, make_table, write_file
from tests.security.untouched import Untouched


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    yield from metastore_on(request, tmp_path)


@pytest.fixture
def victim(store: Metastore) -> tuple[Table, Partition]:
    """Managed table ``shop.t`` partitioned by ``p`` with partition p=victim holding a file."""
    c = store.catalog
    c.create_database(Database(name="shop"))
    table = c.create_table(make_table("shop", "t", partition_keys=("p",)))
    [part] = c.add_partitions("shop", "t", [make_partition(table, "victim")])
    write_file(part.sd.location or "", "000000_0", b"the victim's rows")
    c.insert("shop", "t", ["victim"])
    return table, part


def _at(table: Table, value: str, location: str) -> Partition:
    part = make_partition(table, value)
    return part.model_copy(update={"sd": part.sd.model_copy(update={"location": location})})


def _guarded(store: Metastore) -> list[Path | str]:
    return [store.config.warehouse, store.config.cmroot]


def _refused(store: Metastore, attack: Callable[[], object], *fragments: str) -> None:
    before = Untouched.take(_guarded(store), [store])
    with pytest.raises(InvalidObjectError) as info:
        attack()
    message = str(info.value)
    assert "\n" not in message and "p=victim" in message, message
    for fragment in fragments:
        assert fragment in message, message
    before.assert_same(_guarded(store), [store])


def test_added_partition_at_inside_or_around_a_sibling_is_refused(
    store: Metastore, victim: tuple[Table, Partition]
) -> None:
    table, part = victim
    c = store.catalog
    own = part.sd.location or ""
    _refused(store, lambda: c.add_partitions("shop", "t", [_at(table, "x", own)]), "is the location of")
    _refused(store, lambda: c.add_partitions("shop", "t", [_at(table, "x", own + "/sub")]), "lies inside")
    _refused(
        store, lambda: c.add_partitions("shop", "t", [_at(table, "x", own + "/./../p=victim")]), "is the"
    )
    # one new partition inside another of the same batch, a sibling sorting between them ('-' < '/')
    base = f"{table.sd.location}/nest"
    _refused(
        store,
        lambda: c.add_partitions(
            "shop",
            "t",
            [_at(table, "n1", base), _at(table, "n2", base + "-b"), _at(table, "victim3", base + "/x")],
        ),
        "p=victim3",
        "lies inside",
    )
    # two new partitions sharing a directory in one batch
    shared = f"{table.sd.location}/shared"
    _refused(
        store,
        lambda: c.add_partitions("shop", "t", [_at(table, "victim2", shared), _at(table, "y", shared)]),
        "p=victim2",
    )


def test_partition_around_a_sibling_is_refused(store: Metastore, victim: tuple[Table, Partition]) -> None:
    """p=victim placed deeper by its owner; another partition may not take the directory holding it."""
    table, _ = victim
    c = store.catalog
    deep = f"{table.sd.location}/nest/p=inner"
    [inner] = c.add_partitions("shop", "t", [_at(table, "inner", deep)])
    write_file(inner.sd.location or "", "f", b"inner rows")
    c.insert("shop", "t", ["inner"])
    before = Untouched.take(_guarded(store), [store])
    with pytest.raises(InvalidObjectError, match=r"holds the location of partition 'shop\.t/p=inner'"):
        c.add_partitions("shop", "t", [_at(table, "outer", f"{table.sd.location}/nest")])
    before.assert_same(_guarded(store), [store])


@pytest.mark.parametrize("declared", [False, True])
def test_altered_partition_onto_a_sibling_is_refused_and_a_drop_spares_the_sibling(
    store: Metastore, victim: tuple[Table, Partition], declared: bool
) -> None:
    table, part = victim
    c = store.catalog
    [mine] = c.add_partitions("shop", "t", [make_partition(table, "mine")])
    own = part.sd.location or ""
    moved = mine.model_copy(update={"sd": mine.sd.model_copy(update={"location": own})})
    _refused(store, lambda: c.alter_partitions("shop", "t", [moved], declared=declared), "p=mine")
    inside = mine.model_copy(update={"sd": mine.sd.model_copy(update={"location": own + "/x"})})
    _refused(store, lambda: c.alter_partitions("shop", "t", [inside], declared=declared), "lies inside")
    c.drop_partitions("shop", "t", [["mine"]], delete_data=True)
    assert Path(local_path(own), "000000_0").read_bytes() == b"the victim's rows"
    assert c.get_partition("shop", "t", ["victim"]).sd.location == own


def test_own_partitions_below_the_table_and_a_partition_kept_in_place_are_accepted(
    store: Metastore, victim: tuple[Table, Partition]
) -> None:
    """The rule is about siblings: default and custom directories below the table, and an alter that keeps
    a partition where it is, still work."""
    table, part = victim
    c = store.catalog
    c.add_partitions("shop", "t", [_at(table, "custom", f"{table.sd.location}/elsewhere/p=custom")])
    c.add_partitions("shop", "t", [make_partition(table, "plain")] * 1)
    c.alter_partitions("shop", "t", [part.model_copy(update={"parameters": {"k": "v"}})])
    assert sorted(c.get_partition_names("shop", "t")) == ["p=custom", "p=plain", "p=victim"]
