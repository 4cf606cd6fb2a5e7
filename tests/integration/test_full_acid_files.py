"""Full ACID tables (``transactional=true`` without ``insert_only``): their ``delta_*`` and ``delete_delta_*``
directories replicate as files under write ids, copied as they are, while this project's own readers, the
row comparison of ``repl verify`` and the compactor, which cannot merge delete deltas, refuse such a table
with one line naming it. The files are hand-made (replication never opens them), as a Hive writer would
lay them out: ``delta_<w>_<w>_0000/bucket_00000`` and ``delete_delta_<w>_<w>_0000/bucket_00000``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.acid import visible_files
from hmsrepl.acid.compaction_queue import CompactionQueue
from hmsrepl.acid.compactor import Worker
from hmsrepl.acid.directories import delta_dir_name
from hmsrepl.cli import main
from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage.base import filesystem_for, join_uri
from tests.helpers import make_partition, make_table, open_store, write_file

FULL_ACID = {"transactional": "true", "transactional_properties": "default"}


def delete_delta_dir_name(write_id: int) -> str:
    return "delete_" + delta_dir_name(write_id)


def full_acid_write(
    store: Metastore, table: str, values: list[str] | None, tag: bytes, *, deletes: bool
) -> int:
    """One committed txn as a full ACID writer leaves it: a delta and, for an UPDATE/DELETE, a delete delta."""
    txns = store.txns
    [txn] = txns.open_txns(1)
    [alloc] = txns.allocate_table_write_ids([txn], "sales", table)
    meta = store.catalog.get_table("sales", table)
    location = store.catalog.get_partition("sales", table, values).sd.location if values else meta.sd.location
    dirs = [delta_dir_name(alloc.write_id)] + ([delete_delta_dir_name(alloc.write_id)] if deletes else [])
    files: list[str] = []
    for name in dirs:
        directory = join_uri(location, name)
        write_file(directory, "bucket_00000", b"ORC" + tag + name.encode())
        files += describe_files(location, store.cm, list(filesystem_for(directory).list_files(directory)))
    txns.add_write_notification(txn, alloc.write_id, "sales", table, values, files)
    txns.commit_txn(txn)
    return alloc.write_id


def tree(location: str) -> dict[str, bytes]:
    root = Path(location.removeprefix("file:"))
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Metastore, Metastore, ReplicationEngine]:
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    source.catalog.create_database(Database(name="sales"))
    source.catalog.create_table(make_table("sales", "rows", **FULL_ACID))
    days = source.catalog.create_table(make_table("sales", "days", partition_keys=("day",), **FULL_ACID))
    source.catalog.add_partitions("sales", "days", [make_partition(days, "d1")])
    return source, target, ReplicationEngine(str(tmp_path / "dumps"), source, target)


def test_delta_and_delete_delta_directories_replicate_as_files_under_write_ids(stores) -> None:
    source, target, engine = stores
    full_acid_write(source, "rows", None, b"1", deletes=False)
    full_acid_write(source, "rows", None, b"2", deletes=True)
    engine.execute(f"REPL LOAD sales_dr FROM '{engine.execute('REPL DUMP sales').dump_dir}'")
    full_acid_write(source, "rows", None, b"3", deletes=True)
    full_acid_write(source, "days", ["d1"], b"4", deletes=True)
    [txn] = source.txns.open_txns(1)  # an aborted UPDATE: nothing of it is copied
    [alloc] = source.txns.allocate_table_write_ids([txn], "sales", "rows")
    write_file(
        join_uri(
            source.catalog.get_table("sales", "rows").sd.location, delete_delta_dir_name(alloc.write_id)
        ),
        "bucket_00000",
        b"never",
    )
    source.txns.abort_txns([txn])
    dumped = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")

    replica_rows = tree(target.catalog.get_table("sales_dr", "rows").sd.location)
    source_rows = tree(source.catalog.get_table("sales", "rows").sd.location)
    aborted = f"{delete_delta_dir_name(alloc.write_id)}/bucket_00000"
    assert replica_rows == {k: v for k, v in source_rows.items() if k != aborted}
    assert sorted(replica_rows) == [
        "delete_delta_0000002_0000002_0000/bucket_00000",
        "delete_delta_0000003_0000003_0000/bucket_00000",
        "delta_0000001_0000001_0000/bucket_00000",
        "delta_0000002_0000002_0000/bucket_00000",
        "delta_0000003_0000003_0000/bucket_00000",
    ]
    days = tree(target.catalog.get_partition("sales_dr", "days", ["d1"]).sd.location)
    assert days == tree(source.catalog.get_partition("sales", "days", ["d1"]).sd.location)
    assert verify(source, "sales", target, "sales_dr") == []


def test_readers_verify_rows_and_the_compactor_refuse_a_full_acid_table_in_one_line(stores, tmp_path) -> None:
    source, target, engine = stores
    full_acid_write(source, "rows", None, b"1", deletes=True)
    with pytest.raises(
        InvalidObjectError, match=r"'sales\.rows'.*full ACID.*transactional_properties='default'"
    ) as err:
        visible_files(source, "sales", "rows")
    assert "\n" not in str(err.value)

    engine.execute(f"REPL LOAD sales_dr FROM '{engine.execute('REPL DUMP sales').dump_dir}'")
    # Different files on the replica: verify cannot tell from rows (delete deltas are not merged here).
    location = target.catalog.get_table("sales_dr", "rows").sd.location
    moved = join_uri(location, "delta_0000001_0000001_0000/bucket_00000")
    Path(moved.removeprefix("file:")).write_bytes(b"ORC other bytes")
    [problem] = verify(source, "sales", target, "sales_dr")
    assert problem.startswith("table rows: files differ")
    assert "full ACID" in problem and "delete deltas" in problem and "\n" not in problem

    queued = CompactionQueue(source.events).enqueue(
        "sales", "rows", None
    )  # queued before it became full ACID
    [outcome] = Worker(source).run_all()
    assert outcome.record.id == queued and outcome.state == "failed"
    assert "full ACID" in outcome.message and "\n" not in outcome.message
    env = {
        "HMSREPL_DB_URL": source.config.db_url,
        "HMSREPL_WAREHOUSE": source.config.warehouse,
        "HMSREPL_CMROOT": source.config.cmroot,
    }
    result = CliRunner().invoke(main, ["compact", "--table", "sales.rows", "--engine", "copy"], env=env)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "full ACID" in result.output and len(result.output.strip().splitlines()) == 1
