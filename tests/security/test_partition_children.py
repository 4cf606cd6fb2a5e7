"""The location checks of partitions directly below their table stay exact when the table settles them once.

A partition at ``<table>/<one plain name>`` (Hive's layout, a replica's version directories) skips the
per-partition parse and the root and protected-path checks when its table's directory settles those for all
its children (``LocationPolicy._settled_children``). These tests plant what the shortcut must still refuse: a
child that is a symlink out of the warehouse, a managed root inside the table's directory, cmroot inside it
(a table made before that setting), and check that what it accepts is stored with the keys the full checks
give, on the three backends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.locations import location_key
from hmsrepl.metastore.model import Database, Table
from hmsrepl.metastore.schema import partitions
from tests.backends import temporary_database
from tests.conftest import make_config
from tests.helpers import make_table, partition_at
from tests.security.untouched import tree_hashes


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param != "sqlite":
        request.applymarker(getattr(pytest.mark, request.param))
    with temporary_database(request.param, str(tmp_path)) as url:
        yield url


def _opened(db_url: str, root: Path, **settings: object) -> Metastore:
    return Metastore.open(make_config(db_url, root).model_copy(update=settings))


def _made(store: Metastore) -> Table:
    store.catalog.create_database(Database(name="shop"))
    return store.catalog.create_table(make_table("shop", "t", partition_keys=("p",)))


def _refused(store: Metastore, table: Table, value: str, location: str, *fragments: str) -> None:
    with pytest.raises(InvalidObjectError) as info:
        store.catalog.add_partitions(
            "shop",
            "t",
            [partition_at(table, "ok", f"{table.sd.location}/p=ok"), partition_at(table, value, location)],
        )
    message = str(info.value)
    assert "\n" not in message and f"partition 'shop.t/p={value}'" in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert store.catalog.get_partition_names("shop", "t") == []  # nothing of the call was added


def test_children_in_the_tables_directory_are_stored_with_the_full_checks_keys(
    db_url: str, tmp_path: Path
) -> None:
    """Version directories and escaped names beside the default ones: accepted, each stored with the lookup
    key ``canonical`` gives (the sibling checks and drops rely on it), the table reached through a symlink
    too."""
    store = _opened(db_url, tmp_path)
    try:
        table = _made(store)
        root = table.sd.location
        Path(root).mkdir(parents=True, exist_ok=True)
        os.symlink(root, tmp_path / "warehouse" / "alias")
        store.catalog.alter_table(
            "shop",
            "t",
            table.model_copy(
                update={"sd": table.sd.model_copy(update={"location": str(tmp_path / "warehouse" / "alias")})}
            ),
        )
        table = store.catalog.get_table("shop", "t")
        names = {"a": "p=a.hmsrepl-v7", "b%3Ac": "p=b%3Ac", "d": "p=d"}
        store.catalog.add_partitions(
            "shop",
            "t",
            [partition_at(table, value, f"{table.sd.location}/{name}") for value, name in names.items()],
        )
        with store.engine.connect() as conn:
            rows = conn.execute(select(partitions.c.location, partitions.c.location_key)).all()
        assert sorted(rows) == sorted(
            (loc, location_key(loc)) for loc in (f"{table.sd.location}/{n}" for n in names.values())
        )
        assert all(
            key.startswith(f"{root}/") for _, key in rows
        )  # the symlink resolved, as the full checks do
    finally:
        store.close()


def test_a_child_that_leads_elsewhere_is_refused(db_url: str, tmp_path: Path) -> None:
    """A partition directory that is a symlink out of the warehouse is judged where it leads, and nothing is
    made or changed there."""
    store = _opened(db_url, tmp_path)
    try:
        table = _made(store)
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "secret").write_text("kept")
        before = tree_hashes(outside)
        Path(table.sd.location).mkdir(parents=True, exist_ok=True)
        os.symlink(outside, Path(table.sd.location) / "p=x")
        _refused(
            store,
            table,
            "x",
            f"{table.sd.location}/p=x",
            "outside the managed roots",
            "HMSREPL_MANAGED_ROOTS",
        )
        assert tree_hashes(outside) == before
    finally:
        store.close()


@pytest.mark.parametrize(
    ("setting", "fragments"),
    [("managed_roots", ("is a root itself",)), ("cmroot", ("the change manager root", "HMSREPL_CMROOT"))],
)
def test_a_root_or_cmroot_inside_the_tables_directory_is_still_refused(
    db_url: str, tmp_path: Path, setting: str, fragments: tuple[str, ...]
) -> None:
    """Settings that came after the table: a managed root, or cmroot, inside its directory. Its children
    may not be that directory, whatever the table's directory says of the others."""
    first = _opened(db_url, tmp_path)
    try:
        table = _made(first)
    finally:
        first.close()
    inside = f"{table.sd.location}/p=x"
    store = _opened(db_url, tmp_path, **{setting: [inside] if setting == "managed_roots" else inside})
    try:
        _refused(store, table, "x", inside, *fragments)
        store.catalog.add_partitions("shop", "t", [partition_at(table, "ok", f"{table.sd.location}/p=ok")])
    finally:
        store.close()
