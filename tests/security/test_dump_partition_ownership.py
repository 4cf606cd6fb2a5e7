"""A dump whose partitions do not own their locations is refused before the load changes anything.

A crafted source declares partition ``dt=b`` at (or inside) its sibling ``dt=a``'s directory, or inside
another managed table's directory: applied, a later drop of one would recycle the other's files on the
replica. Dump validation applies the catalog's ownership rule to the dump's locations as a whole. Each case
edits a copy of a real bootstrap dump; the replica's catalog rows, notification log and every file of both
sides are hashed before and after, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.locations import canonical
from hmsrepl.metastore.model import Database
from hmsrepl.replication import layout, load
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.dump_ownership import DumpOwnership
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.helpers import (
    edit_dumped_partition,
    make_partition,
    make_table,
    open_replica,
    open_sqlite_source,
    write_file,
)
from tests.security.untouched import Untouched, tree_hashes


class Scene:
    def __init__(self, root: Path, source: Metastore, target: Metastore) -> None:
        self.root, self.source, self.target = root, source, target
        self.engine = ReplicationEngine(str(root / "dumps"), source, target)
        self.dump = Path(local_path(self.engine.execute("REPL DUMP sales").dump_dir))

    def guarded(self) -> list[Path | str]:
        return [self.root / "src_wh", self.root / "src_cm", self.root / "dst_wh", self.root / "dst_cm"]

    def location(self, table: str, *values: str) -> str:
        c = self.source.catalog
        found = c.get_partition("sales", table, list(values)) if values else c.get_table("sales", table)
        return found.sd.location or ""

    def tampered(self, name: str, partition_dir: str, location: str) -> str:
        """A copy of the dump whose partition ``partition_dir`` of ``events`` is declared at ``location``
        (without files of its own, so that only its location is in question)."""
        copy = self.root / "dumps" / f"tampered-{name}"
        shutil.copytree(self.dump, copy)

        def declare(doc: dict[str, Any], files: list[str] | None) -> list[str]:
            doc["partition"]["sd"]["location"] = location
            return []

        edit_dumped_partition(copy, "sales", "events", partition_dir, declare)
        return str(copy)


@pytest.fixture(params=["sqlite", "postgres"])
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scene]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    source = open_sqlite_source(tmp_path)
    with temporary_database(request.param, str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        try:
            source.catalog.create_database(Database(name="sales"))
            events = source.catalog.create_table(make_table("sales", "events", partition_keys=("dt",)))
            source.catalog.add_partitions("sales", "events", [make_partition(events, v) for v in ("a", "b")])
            orders = source.catalog.create_table(make_table("sales", "orders"))
            for values in (["a"], ["b"]):
                part = source.catalog.get_partition("sales", "events", values)
                write_file(part.sd.location or "", "f", values[0].encode())
            write_file(orders.sd.location or "", "o", b"orders")
            yield Scene(tmp_path, source, target)
        finally:
            target.close()
            source.close()


@pytest.mark.parametrize(
    ("case", "where", "relation"),
    [
        ("at_sibling", lambda s: s.location("events", "a"), "is the location of partition 'events/dt=a'"),
        (
            "inside_sibling",
            lambda s: s.location("events", "a") + "/nested",
            "lies inside the location of partition",
        ),
        (
            "inside_other_table",
            lambda s: s.location("orders") + "/dt=b",
            "lies inside the location of table 'orders'",
        ),
    ],
)
def test_a_partition_that_does_not_own_its_location_is_refused(scene: Scene, case, where, relation) -> None:
    dump = scene.tampered(case, "dt=b", where(scene))
    before = Untouched.take(scene.guarded(), [scene.target])
    with pytest.raises(DumpValidationError) as info:
        scene.engine.execute(f"REPL LOAD sales_dr FROM '{dump}'")
    message = str(info.value)
    assert "refused, nothing was applied" in message and "partition 'events/dt=b'" in message, message
    assert relation in message and "\n" not in message, message
    before.assert_same(scene.guarded(), [scene.target])
    assert "sales_dr" not in scene.target.catalog.get_databases()


def test_the_untampered_dump_loads(scene: Scene) -> None:
    scene.engine.execute(f"REPL LOAD sales_dr FROM '{scene.dump}'")
    assert sorted(scene.target.catalog.get_partition_names("sales_dr", "events")) == ["dt=a", "dt=b"]


class PagedScene(Scene):
    """``events`` with seven partitions ``dt=d0..d6``, dumped two to a page and loaded two per catalog call:
    the bulk path, where a table's partitions reach the catalog page by page in one transaction."""

    def tampered_many(self, name: str, moves: dict[str, str]) -> str:
        copy = self.root / "dumps" / f"tampered-{name}"
        shutil.copytree(self.dump, copy)
        for partition_dir, location in moves.items():

            def declare(doc: dict[str, Any], files: list[str] | None, where: str = location) -> list[str]:
                doc["partition"]["sd"]["location"] = where
                return []

            edit_dumped_partition(copy, "sales", "events", partition_dir, declare)
        return str(copy)


@pytest.fixture(params=["sqlite", "postgres"])
def paged(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PagedScene]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    monkeypatch.setattr(layout, "PAGE_PARTITIONS", 2)
    monkeypatch.setattr(load, "PARTITION_PAGE", 2)
    source = open_sqlite_source(tmp_path)
    with temporary_database(request.param, str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        try:
            source.catalog.create_database(Database(name="sales"))
            events = source.catalog.create_table(make_table("sales", "events", partition_keys=("dt",)))
            values = [f"d{n}" for n in range(7)]
            source.catalog.add_partitions("sales", "events", [make_partition(events, v) for v in values])
            for value in values:
                part = source.catalog.get_partition("sales", "events", [value])
                write_file(part.sd.location or "", "f", value.encode())
            scene = PagedScene(tmp_path, source, target)
            pages = list((scene.dump / "sales" / "events" / "_partitions").iterdir())
            assert len(pages) == 4, pages  # the dump really is paged
            yield scene
        finally:
            target.close()
            source.close()


@pytest.mark.parametrize(
    ("case", "moves", "culprit"),
    [
        ("same_page", lambda s: {"dt=d1": s.location("events", "d0") + "/nested"}, "events/dt=d1"),
        ("across_pages", lambda s: {"dt=d5": s.location("events", "d0")}, "events/dt=d5"),
        (
            "around_a_later_page",
            lambda s: (
                {"dt=d0": s.location("events", "d6").rsplit("/", 1)[0] + "/nest"}
                | {"dt=d6": s.location("events", "d6").rsplit("/", 1)[0] + "/nest/dt=d6"}
            ),
            "events/dt=d6",
        ),
    ],
)
def test_partitions_overlapping_within_and_across_pages_are_refused(
    paged: PagedScene, case, moves, culprit
) -> None:
    dump = paged.tampered_many(case, moves(paged))
    before = Untouched.take(paged.guarded(), [paged.target])
    with pytest.raises(DumpValidationError) as info:
        paged.engine.execute(f"REPL LOAD sales_dr FROM '{dump}'")
    message = str(info.value)
    assert "refused, nothing was applied" in message and culprit in message and "\n" not in message, message
    before.assert_same(paged.guarded(), [paged.target])
    assert "sales_dr" not in paged.target.catalog.get_databases()


def test_past_validation_the_catalog_refuses_overlap_across_a_tables_pages(
    paged: PagedScene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Second line: were the dump's own check missed, the catalog's rule still holds across the catalog calls
    of one table's transaction (a metadata-only load keeps the declared locations), which is rolled back
    whole: no partition of the table, no file touched."""
    paged.dump = Path(
        local_path(
            paged.engine.execute("REPL DUMP sales WITH ('hive.repl.dump.metadata.only'='true')").dump_dir
        )
    )
    dump = paged.tampered_many("past_validation", {"dt=d5": paged.location("events", "d0")})
    monkeypatch.setattr(DumpOwnership, "conflict", lambda self: None)
    guarded = [paged.root / "src_wh", paged.root / "src_cm", paged.root / "dst_cm"]
    files = tree_hashes(*guarded)
    with pytest.raises(InvalidObjectError, match=r"partition 'sales_dr\.events/dt=d5'.* is the location of"):
        paged.engine.execute(f"REPL LOAD sales_dr FROM '{dump}'")
    assert tree_hashes(*guarded) == files
    assert "events" not in paged.target.catalog.get_tables("sales_dr")


def test_past_validation_a_copying_load_gives_each_partition_a_directory_of_its_own(
    paged: PagedScene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load that copies data never writes into a declared location: each partition gets a version directory
    of its own, so two partitions declared at one place still do not share one on the replica."""
    dump = paged.tampered_many("copied", {"dt=d5": paged.location("events", "d0")})
    monkeypatch.setattr(DumpOwnership, "conflict", lambda self: None)
    paged.engine.execute(f"REPL LOAD sales_dr FROM '{dump}'")
    located = [
        canonical(p.sd.location or "") for p in paged.target.catalog.get_partitions("sales_dr", "events")
    ]
    assert len(located) == 7
    for number, loc in enumerate(located):
        assert not any(loc.overlaps(other) for other in located[number + 1 :]), located


def test_the_untampered_paged_dump_loads(paged: PagedScene) -> None:
    paged.engine.execute(f"REPL LOAD sales_dr FROM '{paged.dump}'")
    names = paged.target.catalog.get_partition_names("sales_dr", "events")
    assert sorted(names) == [f"dt=d{n}" for n in range(7)]
