"""A bootstrap dump keeps a table's partitions in pages; dumps of the older layout still load.

A page holds many partitions (one JSON line each, with its files), so a bootstrap of a large table writes and
reads a few files instead of two per partition. A partition with a large listing keeps a directory of its
own, and a dump of layout format 2 (every partition in its own directory) loads into the same replica. A
page that names a partition twice, or lies outside a dumped table, is refused before anything changes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication import layout
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import VERSION_MARK
from hmsrepl.replication.layout import DUMP_METADATA, DumpDir, DumpLayout
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.helpers import make_partition, make_table, open_replica, open_sqlite_source, write_file

PARTITIONS = 7


def _build(source: Metastore) -> None:
    source.catalog.create_database(Database(name="sales"))
    table = source.catalog.create_table(make_table("sales", "events", partition_keys=("dt",)))
    parts = source.catalog.add_partitions(
        "sales", "events", [make_partition(table, f"d{i}") for i in range(PARTITIONS)]
    )
    for i, part in enumerate(parts):
        for f in range(i % 3):  # 0, 1 or 2 files
            write_file(part.sd.location or "", f"part-{f}", f"{i}-{f}".encode())
    source.catalog.create_table(make_table("sales", "plain"))


def _state(store: Metastore, db: str) -> dict[str, list[bytes]]:
    """Each partition of ``events`` with the contents of its files, as a reader sees them."""
    out = {}
    for part in store.catalog.get_partitions(db, "events"):
        directory = Path(local_path(part.sd.location or ""))
        files = (
            sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
            if directory.exists()
            else []
        )
        out["/".join(part.values)] = [p.read_bytes() for p in files]
    return out


def _tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")) if root.exists() else []:
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def to_format_2(dump_dir: Path) -> None:
    """Rewrite a bootstrap dump into layout format 2: every partition in a directory of its own."""
    dump = DumpDir(str(dump_dir))
    for page in sorted(dump_dir.glob("*/*/_partitions/*")):
        db, table = page.parts[-4], page.parts[-3]
        keys = [k["name"] for k in dump.read_json(DumpLayout.table(db, table))["table"]["partition_keys"]]
        for dumped in dump.read_partition_page(str(page.relative_to(dump_dir))):
            snapshot = dumped.document["partition"]
            name = "/".join(f"{k}={v}" for k, v in zip(keys, snapshot["values"], strict=True))
            dump.write_object(DumpLayout.partition(db, table, name), dumped.document, dumped.files)
        page.unlink()
    for pages in dump_dir.glob("*/*/_partitions"):
        pages.rmdir()
    meta = json.loads((dump_dir / DUMP_METADATA).read_text())
    (dump_dir / DUMP_METADATA).write_text(json.dumps({**meta, "format": 2}))


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    source = open_sqlite_source(tmp_path)
    with temporary_database(request.param, str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        try:
            _build(source)
            yield source, target, ReplicationEngine(str(tmp_path / "dumps"), source, target)
        finally:
            target.close()
            source.close()


def test_partitions_come_in_pages_and_load_like_the_older_layout(stores, monkeypatch) -> None:
    source, target, engine = stores
    monkeypatch.setattr(layout, "PAGE_PARTITIONS", 3)
    monkeypatch.setattr(layout, "PAGE_FILES", 1)  # a partition of 2 files keeps its own directory
    dumped = Path(local_path(engine.execute("REPL DUMP sales").dump_dir))
    pages = sorted(p.name for p in (dumped / "sales/events/_partitions").iterdir())
    assert pages == ["000000", "000001"]  # 5 partitions of 0 or 1 file: 3, then 2
    own = sorted(
        str(p.parent.relative_to(dumped / "sales/events")) for p in dumped.glob("sales/events/*/_metadata")
    )
    assert own == ["dt=d2", "dt=d5"]  # the two-file partitions
    older = dumped.parent / "format-2"
    shutil.copytree(dumped, older)
    to_format_2(older)
    assert not (older / "sales/events/_partitions").exists()

    engine.execute(f"REPL LOAD sales_a FROM '{dumped}'")
    engine.execute(f"REPL LOAD sales_b FROM '{older}'")
    expected = _state(source, "sales")
    assert len(expected) == PARTITIONS and expected["d4"] == [b"4-0"]
    assert _state(target, "sales_a") == expected
    assert _state(target, "sales_b") == expected
    assert sorted(target.catalog.get_tables("sales_b")) == ["events", "plain"]


@pytest.mark.parametrize(
    "case",
    [
        "a partition named twice",
        "a partition's file listed twice",
        "a page of a table without _metadata",
        "a page below a partition",
    ],
)
def test_a_malformed_page_is_refused_before_anything_changes(stores, case: str) -> None:
    _source, target, engine = stores
    dumped = Path(local_path(engine.execute("REPL DUMP sales").dump_dir))
    [page] = sorted((dumped / "sales/events/_partitions").iterdir())
    lines = page.read_bytes().splitlines(keepends=True)
    if case == "a partition named twice":
        page.write_bytes(b"".join([*lines, lines[0]]))
        expected = "names partition 'dt=d0' of 'events' a second time"
    elif case == "a partition's file listed twice":  # which checksum would the replica keep?
        docs = [json.loads(line) for line in lines]
        [two] = [doc for doc in docs if len(doc["files"]) == 2][:1]
        two["files"][1] = two["files"][0]
        page.write_text("".join(json.dumps(doc) + "\n" for doc in docs))
        expected = "names the file 'part-0' twice (corrupt dump)"
    elif case == "a page of a table without _metadata":
        (dumped / "sales/ghost/_partitions").mkdir(parents=True)
        shutil.copy(page, dumped / "sales/ghost/_partitions/000000")
        expected = "holds partitions of table 'ghost', which has no _metadata"
    else:
        (dumped / "sales/events/dt=d0/_partitions").mkdir(parents=True)
        shutil.copy(page, dumped / "sales/events/dt=d0/_partitions/000000")
        expected = "is not where a dump keeps a page of partitions"
    warehouse = Path(target.config.warehouse)
    before = _tree_hash(warehouse)
    with pytest.raises(DumpValidationError) as refused:
        engine.execute(f"REPL LOAD sales_r FROM '{dumped}'")
    assert expected in str(refused.value) and "\n" not in str(refused.value)
    assert "sales_r" not in target.catalog.get_databases()
    assert _tree_hash(warehouse) == before


def test_version_directories_left_by_an_interrupted_load_hold_exactly_the_dumped_files(stores) -> None:
    """A bootstrap lists a new version directory only when it was there already (an interrupted attempt's):
    what such an attempt left in an empty partition's directory, or beside a partition's files, is gone,
    and every partition, empty ones included, has its directory."""
    source, target, engine = stores
    dumped = engine.execute("REPL DUMP sales").dump_dir
    version = DumpDir(dumped).require_complete().last_event_id
    events = Path(local_path(target.catalog.default_db_location("sales"))) / "events"
    for value in ("d0", "d1"):  # no file, one file
        left = events / f"dt={value}{VERSION_MARK}{version}"
        left.mkdir(parents=True)
        (left / "part-stray").write_bytes(b"left by a killed load")
    engine.execute(f"REPL LOAD sales FROM '{dumped}'")
    assert _state(target, "sales") == _state(source, "sales")
    for part in target.catalog.get_partitions("sales", "events"):
        assert Path(local_path(part.sd.location or "")).is_dir(), part.values
