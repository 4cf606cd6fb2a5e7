"""The new tables of a bootstrap batch are created together, then filled table by table, in one transaction.

What a user relies on: a batch that fails after its tables were created but before all their partitions were
written leaves none of them (no empty table, no table with part of its partitions), the position says the
bootstrap is not done, and the load run again finishes a replica equal to its source. And the tables the
batch creates together are exactly those a table-by-table load would: the partitioned tables, with the
locations they would have had, beside unpartitioned ones that take their data with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hmsrepl.exceptions import NoSuchDatabaseError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import privileged
from hmsrepl.replication.bootstrap_tables import gather_table
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.table_pool import PARALLELISM_ENV
from hmsrepl.replication.target import PreparedPartitions, TargetWriter
from hmsrepl.replication.verify import verify
from tests.helpers import make_partition, make_table, open_partitioned_source, open_sqlite_source, write_file

TABLES = 5


def _source(root: Path) -> Metastore:
    """Partitioned tables with files, and one unpartitioned table with a file (created table by table)."""
    source = open_partitioned_source(root, "shop", TABLES)
    plain = source.catalog.create_table(make_table("shop", "plain"))
    write_file(plain.sd.location or "", "f", b"plain")
    return source


def test_a_batch_failing_after_its_tables_were_created_leaves_none_and_the_load_finishes_when_run_again(
    metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PARALLELISM_ENV, "1")  # one worker: every table in one batch
    source = _source(tmp_path)
    try:
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, metastore)
        dump = engine.execute("REPL DUMP shop").dump_dir
        real = TargetWriter.prepare_partitions  # a bootstrap's pages: prepared, then written

        def failing(
            self: TargetWriter, table_name: str, *args: Any, **kwargs: Any
        ) -> PreparedPartitions | None:
            if table_name == "t3":  # t0..t4 were all created by then, t0..t2 filled
                raise OSError("disk failed while writing t3")
            return real(self, table_name, *args, **kwargs)

        monkeypatch.setattr(TargetWriter, "prepare_partitions", failing)
        with pytest.raises(Exception, match="disk failed while writing t3"):
            engine.execute(f"REPL LOAD shop_dr FROM '{dump}'")
        assert repl_status(metastore, "shop_dr") is None  # the bootstrap is not done
        assert metastore.catalog.get_tables("shop_dr") == []  # one batch: none of its tables stays
        monkeypatch.setattr(TargetWriter, "prepare_partitions", real)
        result = engine.execute(f"REPL LOAD shop_dr FROM '{dump}'")
        assert repl_status(metastore, "shop_dr") == source.events.current_event_id()
        assert result.stats.tables == TABLES + 1 and result.stats.partitions == 3 * TABLES
        assert verify(source, "shop", metastore, "shop_dr") == []
        for number in range(TABLES):  # where a table-by-table load puts them: under the replica's database
            table = metastore.catalog.get_table("shop_dr", f"t{number}")
            assert (table.sd.location or "").endswith(f"/shop_dr.db/t{number}"), table.sd.location
    finally:
        source.close()


def test_a_table_s_partitions_are_read_ahead_one_page_at_most_and_all_arrive_in_order(tmp_path: Path) -> None:
    """The batch learns a table's weight from a page read ahead; a large table's other partitions are still
    read from the dump as they are written, and none is lost or reordered."""
    source = open_sqlite_source(tmp_path)
    target = Metastore.open(source.config.model_copy(update={"db_url": f"sqlite:///{tmp_path}/t.db"}))
    try:
        source.catalog.create_database(Database(name="big"))
        table = source.catalog.create_table(make_table("big", "t", partition_keys=("p",)))
        values = [f"{n:02d}" for n in range(7)]
        source.catalog.add_partitions("big", "t", [make_partition(table, v) for v in values])
        dump_dir = (
            ReplicationEngine(str(tmp_path / "dumps"), source, target).execute("REPL DUMP big").dump_dir
        )
        document = source.catalog.get_table("big", "t").model_dump(mode="json")
        gathered = gather_table(DumpDir(dump_dir), "big", document, 3)
        assert gathered.ahead == 3
        assert [d.document["partition"]["values"][0] for d in gathered.partitions] == values
        plain = gather_table(DumpDir(dump_dir), "big", {**document, "partition_keys": []}, 3)
        assert plain.ahead == 0 and list(plain.partitions) == []
    finally:
        target.close()
        source.close()


def test_a_privileged_write_to_a_missing_database_still_names_the_database(metastore: Metastore) -> None:
    """A replication load's partitions skip the database's row (a privileged writer is never refused), and a
    missing database is still reported as such, not as a missing table."""
    with privileged("replication load"), pytest.raises(NoSuchDatabaseError, match="nowhere"):
        metastore.catalog.add_partitions("nowhere", "t", [])
