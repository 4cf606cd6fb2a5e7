"""A bootstrap dump of many tables read by several processes (``replication.dump_processes``).

With ``HMSREPL_DUMP_PROCESS_MIN_OBJECTS`` at 1 a dump of a little more than one slice of tables hands them to
two real worker processes, which open the source's database themselves: the dump they write must be the one
a single process writes, byte for byte, on every backend, and load into a replica equal to its source. A
worker killed mid-dump fails it in one line and leaves it unacknowledged; a bad setting changes nothing.

One big table is read in ranges of partition names by the dump's process and a worker at once: its pages
are numbered by range, and hold, in page order, the partitions one process writes, line for line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.faults import FAULT_ENV
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication import dump_processes
from hmsrepl.replication.dump import DumpEngine, DumpResult
from hmsrepl.replication.dump_processes import FAULT_POINT, MIN_OBJECTS_ENV, PROCESSES_ENV, SLICE_TABLES
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpDir, DumpError
from hmsrepl.replication.replications import ReplicationConfigError
from hmsrepl.replication.verify import verify
from tests.helpers import make_partition, make_table, open_replica, write_file

TABLES = SLICE_TABLES + 30  # two slices: one per worker


def _fill(store: Metastore) -> None:
    store.catalog.create_database(Database(name="shop"))
    for number in range(TABLES):
        partitioned = number % 3 != 0
        table = store.catalog.create_table(
            make_table("shop", f"t{number:03d}", partition_keys=("p",) if partitioned else ())
        )
        if partitioned:
            parts = store.catalog.add_partitions(
                "shop", table.table_name, [make_partition(table, "a"), make_partition(table, "b")]
            )
            if number % 10 == 1:
                write_file(parts[0].sd.location or "", "part-0.txt", f"shop.{number}".encode())


def _tree(root: Path) -> dict[str, object]:
    """Every file of a dump by relative path: its bytes, and the dump's metadata but its time of creation."""
    tree: dict[str, object] = {
        str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()
    }
    metadata = json.loads(tree.pop("_dumpmetadata"))  # type: ignore[arg-type]
    metadata.pop("created")
    return {**tree, "_dumpmetadata": metadata}


def _dumped_alone(
    source: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, least: int
) -> tuple[ReplicationEngine, DumpResult]:
    """An engine replicating ``shop`` into a SQLite replica, processes used from ``least`` objects, and the
    dump it writes in one process."""
    engine = ReplicationEngine(
        str(tmp_path / "dumps"), source, open_replica(f"sqlite:///{tmp_path}/r.db", tmp_path)
    )
    monkeypatch.setenv(MIN_OBJECTS_ENV, str(least))
    monkeypatch.setenv(PROCESSES_ENV, "1")
    return engine, engine.execute("REPL DUMP shop")


def _counted_alike_and_loaded(
    engine: ReplicationEngine, source: Metastore, pooled: DumpResult, alone: DumpResult
) -> None:
    """The dump read by processes counts what the one read alone does, and loads into an equal replica."""
    assert (pooled.tables, pooled.partitions, pooled.files) == (alone.tables, alone.partitions, alone.files)
    engine.execute(f"REPL LOAD shop FROM '{pooled.dump_dir}'")
    assert verify(source, "shop", engine.target, "shop") == []
    engine.target.close()


def test_a_dump_read_by_processes_is_the_dump_one_process_writes(
    metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(metastore)
    engine, alone = _dumped_alone(metastore, tmp_path, monkeypatch, 1)
    monkeypatch.setenv(PROCESSES_ENV, "2")
    slices: list[list[str]] = []
    real = dump_processes.dump_in_processes

    def counted(*args: Any, **kwargs: Any) -> Iterator[tuple[list[str], Any]]:
        for names, tally in real(*args, **kwargs):
            slices.append(names)
            yield names, tally

    monkeypatch.setattr(dump_processes, "dump_in_processes", counted)
    pooled = engine.execute("REPL DUMP shop")

    assert len(slices) == 2 and sum(map(len, slices)) == TABLES
    assert _tree(Path(pooled.dump_dir)) == _tree(Path(alone.dump_dir))
    assert pooled.tables == TABLES and pooled.files == sum(1 for n in range(TABLES) if n % 10 == 1 and n % 3)
    _counted_alike_and_loaded(engine, metastore, pooled, alone)


def test_a_dump_process_killed_fails_the_dump_unacknowledged(
    sqlite_metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(sqlite_metastore)
    target = open_replica(f"sqlite:///{tmp_path}/r.db", tmp_path)
    engine = ReplicationEngine(str(tmp_path / "dumps"), sqlite_metastore, target)
    monkeypatch.setenv(MIN_OBJECTS_ENV, "1")
    monkeypatch.setenv(PROCESSES_ENV, "2")
    monkeypatch.setenv(FAULT_ENV, f"{FAULT_POINT}@1")  # a worker dies as it starts a slice

    with pytest.raises(DumpError) as failed:
        engine.execute("REPL DUMP shop")
    message = str(failed.value)
    assert "\n" not in message and "dump process stopped" in message and "not acknowledged" in message
    [left] = list((tmp_path / "dumps").iterdir())
    with pytest.raises(DumpError):  # an unacknowledged dump is never loaded
        engine.execute(f"REPL LOAD shop FROM '{left}'")
    assert "shop" not in target.catalog.get_databases()

    monkeypatch.delenv(FAULT_ENV)
    again = engine.execute("REPL DUMP shop")
    engine.execute(f"REPL LOAD shop FROM '{again.dump_dir}'")
    assert verify(sqlite_metastore, "shop", target, "shop") == []
    target.close()


@pytest.mark.parametrize("setting", [PROCESSES_ENV, MIN_OBJECTS_ENV])
@pytest.mark.parametrize("value", ["0", "many", "65"])
def test_a_bad_setting_is_refused_before_anything_is_written(
    sqlite_metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, value: str
) -> None:
    if setting == MIN_OBJECTS_ENV and value == "65":
        value = "-3"
    sqlite_metastore.catalog.create_database(Database(name="shop"))
    engine = ReplicationEngine(str(tmp_path / "dumps"), sqlite_metastore, sqlite_metastore)
    monkeypatch.setenv(setting, value)
    with pytest.raises(ReplicationConfigError) as refused:
        engine.execute("REPL DUMP shop")
    assert str(refused.value).startswith(f"{setting}={value!r} is not ") and "\n" not in str(refused.value)
    assert not any((tmp_path / "dumps").rglob("*_metadata"))


BIG = 57  # partitions of the one big table: six ranges of RANGED and a seventh that is empty
RANGED = 10


def _fill_big(store: Metastore) -> None:
    """Database ``shop``: a small table and table ``big`` of BIG partitions, a few with a file."""
    store.catalog.create_database(Database(name="shop"))
    store.catalog.create_table(make_table("shop", "small", partition_keys=("p",)))
    table = store.catalog.create_table(make_table("shop", "big", partition_keys=("p",)))
    values = [f"{number:02d}" if number % 7 else f"x{number}" for number in range(BIG)]  # names out of order
    parts = store.catalog.add_partitions("shop", "big", [make_partition(table, value) for value in values])
    for part in parts[::9]:
        write_file(part.sd.location or "", "part-0.txt", f"big.{part.values[0]}".encode())


def _big_table(dump_dir: str) -> tuple[list[str], bytes, bytes]:
    """The big table's page names, its pages' lines in page order, and its entry."""
    root = Path(dump_dir) / "shop" / "big"
    pages = sorted((root / "_partitions").iterdir())
    return (
        [page.name for page in pages],
        b"".join(p.read_bytes() for p in pages),
        (root / "_metadata").read_bytes(),
    )


def test_a_big_table_read_in_ranges_holds_what_one_process_writes(
    metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill_big(metastore)
    engine, alone = _dumped_alone(metastore, tmp_path, monkeypatch, BIG)
    monkeypatch.setenv(PROCESSES_ENV, "2")
    monkeypatch.setattr(dump_processes, "RANGE_PARTITIONS", RANGED)
    here: list[int] = []  # first pages of the ranges this process read (the worker's are not seen here)
    real = DumpEngine.dump_range

    def counted(self: DumpEngine, dump: DumpDir, *args: Any) -> None:
        here.append(args[2])
        real(self, dump, *args)

    monkeypatch.setattr(DumpEngine, "dump_range", counted)
    ranged = engine.execute("REPL DUMP shop")

    pages, lines, entry = _big_table(ranged.dump_dir)
    one_pages, one_lines, one_entry = _big_table(alone.dump_dir)
    assert one_pages == ["000000"] and len(pages) == BIG // RANGED + 1  # a page per non-empty range
    assert all(int(page) % dump_processes.RANGE_PAGES == 1 for page in pages)
    assert (lines, entry) == (one_lines, one_entry)  # the same partitions, in the same order
    assert 0 < len(here) < BIG // RANGED + 2  # this process read some ranges, the worker the others
    assert (ranged.partitions, ranged.files) == (BIG, len(range(0, BIG, 9)))
    _counted_alike_and_loaded(engine, metastore, ranged, alone)


def test_a_range_process_killed_fails_the_dump_unacknowledged(
    sqlite_metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill_big(sqlite_metastore)
    engine = ReplicationEngine(str(tmp_path / "dumps"), sqlite_metastore, sqlite_metastore)
    monkeypatch.setenv(MIN_OBJECTS_ENV, str(BIG))
    monkeypatch.setenv(PROCESSES_ENV, "2")
    monkeypatch.setattr(dump_processes, "RANGE_PARTITIONS", RANGED)
    monkeypatch.setenv(FAULT_ENV, f"{FAULT_POINT}@1")  # the worker dies as it starts its first range

    with pytest.raises(DumpError) as failed:
        engine.execute("REPL DUMP shop")
    message = str(failed.value)
    assert "\n" not in message and "dump process stopped" in message and "table 'big'" in message
    assert "not acknowledged" in message
    [left] = list((tmp_path / "dumps").iterdir())
    assert not (left / "_finished_dump").exists()


def test_a_range_past_its_pages_fails_instead_of_writing_over_the_next(
    sqlite_metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill_big(sqlite_metastore)
    engine = DumpEngine(sqlite_metastore, str(tmp_path / "dumps"))
    table = sqlite_metastore.catalog.get_table("shop", "big")
    dump = DumpDir(str(tmp_path / "dumps" / "one"))
    monkeypatch.setattr(dump_processes, "RANGE_PAGES", 2)
    monkeypatch.setattr("hmsrepl.metastore.bulk_reads.PAGE_ROWS", 20)  # three pages of the table's 57

    with pytest.raises(DumpError) as failed:
        engine.dump_range(dump, table, ("", None), dump_processes.first_page(0), True)
    assert "more than 2 pages" in str(failed.value) and "HMSREPL_DUMP_PROCESSES=1" in str(failed.value)
    assert sorted(path.name for path in (tmp_path / "dumps" / "one").rglob("0*")) == ["000001", "000002"]
