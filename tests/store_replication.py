"""One replication scenario for every store: warehouses, cmroots and dump roots on S3, HDFS, local disks, mixed.

The store tests differ in where each side lives and what the store does with a file (a rename on HDFS, a
version on S3); the scenario itself is shared: a workload of a partitioned and a plain table with files
written through the storage layer (as a Hive or Spark writer on that store would) and registered with the
metastore, a bootstrap, a round of changes (an overwrite, a dropped partition, a rename) and an incremental
load, with the replica compared to the source by ``verify`` after each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Partition
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage import filesystem_for
from tests.helpers import make_partition, make_table

OpenStore = Callable[[str, str, str], Metastore]


def put(uri: str, data: bytes) -> str:
    """Write ``data`` at ``uri`` as a writer on that store would; the URI, for registering it."""
    filesystem_for(uri).write_bytes(uri, data)
    return uri


def read(uri: str) -> bytes:
    with filesystem_for(uri).open_read(uri) as stream:
        return stream.read()


def open_stores(tmp_path: Path) -> Iterator[OpenStore]:
    """A fixture body: opens metastores on SQLite files below ``tmp_path`` with the given warehouse and
    cmroot (no trash), and closes them all at teardown."""
    opened: list[Metastore] = []

    def open_store(name: str, warehouse: str, cmroot: str) -> Metastore:
        store = Metastore.open(
            MetastoreConfig(
                db_url=f"sqlite:///{tmp_path}/{name}.db", warehouse=warehouse, cmroot=cmroot, trash_root=""
            )
        )
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def workload(source: Metastore) -> None:
    """Database ``sales``: ``orders`` partitioned by day (one value with a character that needs escaping)
    and ``plain``, each with a file registered by an INSERT event."""
    catalog = source.catalog
    catalog.create_database(Database(name="sales"))
    orders = catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    for day in ("d1", "k:v"):
        [part] = catalog.add_partitions("sales", "orders", [make_partition(orders, day)])
        put(f"{part.sd.location}/part-0.parquet", f"rows of {day}".encode())
        catalog.insert("sales", "orders", [day])
    plain = catalog.create_table(make_table("sales", "plain"))
    put(f"{plain.sd.location}/000000_0", b"a,1\n")
    catalog.insert("sales", "plain")


def changes(source: Metastore) -> None:
    """An overwrite of ``orders/d1``, a dropped partition and a renamed table."""
    catalog = source.catalog
    d1 = catalog.get_partition("sales", "orders", ["d1"])
    new = put(f"{d1.sd.location}/part-1.parquet", b"rows of d1, rewritten")
    catalog.insert("sales", "orders", ["d1"], new_files=[new], replace=True)
    catalog.drop_partitions("sales", "orders", [["k:v"]])
    plain = catalog.get_table("sales", "plain")
    catalog.alter_table("sales", "plain", plain.model_copy(update={"table_name": "plain2"}))


def bootstrap_then_incremental(source: Metastore, target: Metastore, dump_root: str) -> Partition:
    """The scenario: workload, bootstrap into ``sales_dr``, changes, incremental; the replica equals the
    source after each load and is caught up with its log. The replica's ``orders/d1``, for the store's own
    checks."""
    engine = ReplicationEngine(dump_root, source, target)
    workload(source)
    dumped = engine.execute("REPL DUMP sales")
    assert dumped.dump_dir.startswith(dump_root)
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert verify(source, "sales", target, "sales_dr") == []
    changes(source)
    inc = engine.execute(f"REPL DUMP sales FROM {dumped.last_event_id}")
    engine.execute(f"REPL LOAD sales_dr FROM '{inc.dump_dir}'")
    assert verify(source, "sales", target, "sales_dr") == []
    assert repl_status(target, "sales_dr") == source.get_current_notification_event_id()
    d1 = target.catalog.get_partition("sales_dr", "orders", ["d1"])
    assert read(f"{d1.sd.location}/part-1.parquet") == b"rows of d1, rewritten"
    return d1
