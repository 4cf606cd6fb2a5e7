"""A transactional table renamed into the policy's database from another one, bootstrapped with its write ids.

The rename is logged under the database the table leaves; the dump of the database it enters bootstraps it
inside the incremental load as it does a table renamed in from outside the policy's filter
(``test_acid_policy_change``): its write-id state as of the dump's txn snapshot, its visible files, and a txn
still open at the dump (which allocated its write id before the rename) commits onto it later.
"""

from __future__ import annotations

from hmsrepl.acid import InsertOnlyWriter
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from tests.dump_events import read_events
from tests.helpers import make_table, write_file
from tests.integration import test_acid_policy_change as acid
from tests.integration.test_acid_policy_change import ACID, OpenTxn, catch_up, run, seen, write

# The transactional replication tests' fixtures: source and replica on SQLite and PostgreSQL, database sales.
backend, source, target, engine = acid.backend, acid.source, acid.target, acid.engine


def write_in(store: Metastore, db: str, table: str, rows: bytes, *, abort: bool = False) -> None:
    writer = InsertOnlyWriter(store, db, table, None, heartbeat=False).begin()
    write_file(writer.target_uri, "part-0.txt", rows)
    writer.abort() if abort else writer.commit()


class HeldFrom(OpenTxn):
    """An open txn whose write id was allocated while the table was in database ``db``."""

    def __init__(self, store: Metastore, db: str, table: str) -> None:
        self.store, self.table = store, table
        [self.txn_id] = store.txns.open_txns(1)
        [alloc] = store.txns.allocate_table_write_ids([self.txn_id], db, table)
        self.write_id = alloc.write_id


def test_a_transactional_table_renamed_in_from_another_database_keeps_its_write_ids(
    engine, source, target
) -> None:
    catalog = source.catalog
    catalog.create_database(Database(name="staging"))
    catalog.create_table(make_table("sales", "t1", **ACID))
    catalog.create_table(make_table("staging", "loads", **ACID))
    write(source, "t1", b"t1 rows")
    write_in(source, "staging", "loads", b"staging 1")
    write_in(source, "staging", "loads", b"staging aborted", abort=True)
    run(engine, "REPL DUMP sales")
    assert target.catalog.get_tables("sales_dr") == ["t1"]

    held = HeldFrom(source, "staging", "loads")  # its write id allocated before the rename
    catalog.alter_table(
        "staging", "loads", catalog.get_table("staging", "loads").model_copy(update={"db_name": "sales"})
    )
    write(source, "loads", b"loads after the rename")

    dumped = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}")
    assert DumpDir(dumped.dump_dir).read_metadata().bootstrapped_tables == ["loads"]
    assert not [e for e in read_events(dumped.dump_dir) if e["table"] == "loads"]
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert target.catalog.get_tables("sales_dr") == ["loads", "t1"]
    assert seen(target, "sales_dr", "loads") == seen(source, "sales", "loads")
    assert seen(target, "sales_dr", "loads")["write_ids"] == f"4:{held.write_id}:{held.write_id}:2"
    assert verify(source, "sales", target, "sales_dr") == []

    held.commit("loads", b"the held txn's rows")  # under the new name, onto the bootstrapped table
    catch_up(engine, "sales")
    assert seen(target, "sales_dr", "loads") == seen(source, "sales", "loads")
    assert verify(source, "sales", target, "sales_dr") == []
