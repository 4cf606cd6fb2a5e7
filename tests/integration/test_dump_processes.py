"""A bootstrap dump of many tables read by several processes (``replication.dump_processes``).

With ``HMSREPL_DUMP_PROCESS_MIN_OBJECTS`` at 1 a dump of a little more than one slice of tables hands them to
two real worker processes, which open the source's database themselves: the dump they write must be the one
a single process writes, byte for byte, on every backend, and load into a replica equal to its source. A
worker killed mid-dump fails it in one line and leaves it unacknowledged; a bad setting changes nothing.
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
from hmsrepl.replication.dump_processes import FAULT_POINT, MIN_OBJECTS_ENV, PROCESSES_ENV, SLICE_TABLES
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpError
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


def test_a_dump_read_by_processes_is_the_dump_one_process_writes(
    metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(metastore)
    engine = ReplicationEngine(
        str(tmp_path / "dumps"), metastore, open_replica(f"sqlite:///{tmp_path}/r.db", tmp_path)
    )
    monkeypatch.setenv(MIN_OBJECTS_ENV, "1")
    monkeypatch.setenv(PROCESSES_ENV, "1")
    alone = engine.execute("REPL DUMP shop")
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
    assert (pooled.tables, pooled.partitions, pooled.files) == (alone.tables, alone.partitions, alone.files)
    assert pooled.tables == TABLES and pooled.files == sum(1 for n in range(TABLES) if n % 10 == 1 and n % 3)
    engine.execute(f"REPL LOAD shop FROM '{pooled.dump_dir}'")
    assert verify(metastore, "shop", engine.target, "shop") == []
    engine.target.close()


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
