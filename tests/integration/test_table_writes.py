"""A load puts each plain table once per batch: its INSERTs and ALTER_TABLEs are folded into its last state.

A Spark job appending to an unpartitioned table logs an INSERT per write (and an ALTER_TABLE when its
statistics follow); the load composes a batch's changes of the table and writes it once, where each event
cost a catalog write, a publication of its files and a replica event of its own. The replica must still
hold exactly the source's files and metadata, whatever the mix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.target import TargetWriter
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.helpers import make_table, write_file


def _append(source: Metastore, name: str, data: bytes) -> None:
    table = source.catalog.get_table("w", "plain")
    source.catalog.insert("w", "plain", new_files=[write_file(table.sd.location or "", name, data)])


def _load(engine: ReplicationEngine) -> None:
    last = engine.execute("REPL STATUS w_dr")
    dumped = engine.execute(f"REPL DUMP w FROM {last}")
    engine.execute(f"REPL LOAD w_dr FROM '{dumped.dump_dir}'")


def _replica_files(target: Metastore) -> dict[str, bytes]:
    root = Path(local_path(target.catalog.get_table("w_dr", "plain").sd.location or ""))
    return {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}


def test_a_tables_writes_in_one_batch_are_put_once(
    engine: ReplicationEngine, source: Metastore, target: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three appends, a change of parameters between them and an overwrite of one file: one put of the
    table for the batch, and the replica holds the source's files and parameters."""
    source.catalog.create_database(Database(name="w"))
    source.catalog.create_table(make_table("w", "plain"))
    _append(source, "part-0.parquet", b"rows 0")
    dumped = engine.execute("REPL DUMP w")
    engine.execute(f"REPL LOAD w_dr FROM '{dumped.dump_dir}'")
    _append(source, "part-1.parquet", b"rows 1")
    table = source.catalog.get_table("w", "plain")
    changed = table.model_copy(update={"parameters": {**table.parameters, "owner.team": "etl"}})
    source.catalog.alter_table("w", "plain", changed)
    _append(source, "part-2.parquet", b"rows 2")
    _append(source, "part-3.parquet", b"rows 3")
    puts: list[str] = []
    real = TargetWriter.put_table

    def counted(self: TargetWriter, snapshot: dict, *args: object, **kwargs: object) -> object:
        puts.append(snapshot["table_name"])
        return real(self, snapshot, *args, **kwargs)

    monkeypatch.setattr(TargetWriter, "put_table", counted)
    _load(engine)
    assert puts == ["plain"]  # four events, one put
    assert verify(source, "w", target, "w_dr") == []
    assert target.catalog.get_table("w_dr", "plain").parameters["owner.team"] == "etl"
    assert _replica_files(target) == {f"part-{n}.parquet": f"rows {n}".encode() for n in range(4)}
    # the next batch starts from the folded state: one more append is added to it
    _append(source, "part-4.parquet", b"rows 4")
    _load(engine)
    assert verify(source, "w", target, "w_dr") == []
    assert _replica_files(target)["part-4.parquet"] == b"rows 4"


def test_a_tables_run_is_put_before_its_rename_and_its_drop(
    engine: ReplicationEngine, source: Metastore
) -> None:
    """Writes, then a rename, then writes under the new name and a table re-created at the old one: each
    name's run is put before the event that changes the table, so the replica equals the source."""
    target = engine.target
    source.catalog.create_database(Database(name="w"))
    source.catalog.create_table(make_table("w", "plain"))
    dumped = engine.execute("REPL DUMP w")
    engine.execute(f"REPL LOAD w_dr FROM '{dumped.dump_dir}'")
    _append(source, "part-0.parquet", b"rows 0")
    _append(source, "part-1.parquet", b"rows 1")
    source.catalog.alter_table("w", "plain", make_table("w", "moved"))
    moved = source.catalog.get_table("w", "moved")
    source.catalog.insert(
        "w", "moved", new_files=[write_file(moved.sd.location or "", "part-2.parquet", b"2")]
    )
    source.catalog.create_table(make_table("w", "plain"))
    _append(source, "part-9.parquet", b"rows 9")
    _load(engine)
    assert verify(source, "w", target, "w_dr") == []
    assert _replica_files(target) == {"part-9.parquet": b"rows 9"}
    source.catalog.drop_table("w", "moved")
    _load(engine)
    assert verify(source, "w", target, "w_dr") == []
