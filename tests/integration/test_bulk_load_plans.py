"""A transaction that fills a table plans each statement for the table as it is, and only that transaction.

PostgreSQL keeps one generic plan for a prepared statement after five runs; chosen while a bootstrap load's
table is still empty, it scans the table for every later page, and the load of one big table grew
quadratically (4.7 ms a partition at 100,000 against 0.94 ms at 5,000). ``plan_for_growth`` plans every run
for the rest of the load's transaction; the pooled connection then goes back to its cached plans.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, event, text

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import plan_for_growth
from hmsrepl.metastore.model import Database
from tests.backends import temporary_database
from tests.conftest import make_config
from tests.helpers import make_partition, make_table


def _plan_mode(store: Metastore) -> str:
    """The setting on a connection of the writers' pool (inside a transaction: its own connection)."""
    with store.events.reader() as conn:
        if store.events.current_transaction() is None:
            with store.events.write_engine.connect() as pooled:
                return str(pooled.execute(text("SHOW plan_cache_mode")).scalar_one())
        return str(conn.execute(text("SHOW plan_cache_mode")).scalar_one())


def test_a_filling_transaction_plans_each_statement_and_the_pool_keeps_its_plans_after(
    db_url: str, backend: str, tmp_path: Path
) -> None:
    store = Metastore.open(make_config(db_url, tmp_path))
    try:
        store.catalog.create_database(Database(name="shop"))
        table = store.catalog.create_table(make_table("shop", "t", partition_keys=("p",)))
        with store.events.transaction():
            with store.events.reader() as conn:
                plan_for_growth(conn)
            if backend == "postgres":
                assert _plan_mode(store) == "force_custom_plan"
            for first in range(0, 30, 10):  # pages of one table in one transaction, as a bootstrap writes
                store.catalog.add_partitions(
                    "shop", "t", [make_partition(table, f"{n:03d}") for n in range(first, first + 10)]
                )
        if backend == "postgres":
            for _ in range(3):  # the writers' pooled connection: the setting ended with the transaction
                assert _plan_mode(store) == "auto"
        assert len(store.catalog.get_partition_names("shop", "t")) == 30
    finally:
        store.close()


def test_plan_mode_is_set_once_per_transaction_and_again_in_the_next(
    db_url: str, backend: str, tmp_path: Path
) -> None:
    """A bootstrap batch of many tables asks for the plan mode at each table: one ``SET`` per transaction
    (each is a round trip), and a later transaction on the same pooled connection sets it again."""
    store = Metastore.open(make_config(db_url, tmp_path))
    sent: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "plan_cache_mode" in statement and statement.startswith("SET"):
            sent.append(statement)

    try:
        store.catalog.create_database(Database(name="shop"))
        event.listen(store.engine, "before_cursor_execute", seen)
        for _ in range(2):
            with store.events.transaction():
                for _ in range(3):
                    with store.events.reader() as conn:
                        plan_for_growth(conn)
                if backend == "postgres":
                    assert _plan_mode(store) == "force_custom_plan"
        event.remove(store.engine, "before_cursor_execute", seen)
        assert len(sent) == (2 if backend == "postgres" else 0), sent
    finally:
        store.close()


def test_an_incremental_loads_transactions_plan_for_the_tables_as_they_grew(
    db_url: str, backend: str, tmp_path: Path
) -> None:
    """A replica's tables grow under its incremental loads faster than PostgreSQL's statistics follow; a
    generic plan then filters a table's rows by a list parameter, each row against every name. Each of the
    load's transactions plans its statements for their values, and the load still applies every event."""
    from hmsrepl.replication.engine import ReplicationEngine

    source = Metastore.open(make_config(db_url, tmp_path / "source"))
    with temporary_database(backend, str(tmp_path / "db2")) as target_url:
        target = Metastore.open(make_config(target_url, tmp_path / "target"))
        sent: list[str] = []

        def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
            if statement.startswith("SET LOCAL plan_cache_mode"):
                sent.append(statement)

        try:
            engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
            source.catalog.create_database(Database(name="shop"))
            table = source.catalog.create_table(make_table("shop", "t", partition_keys=("p",)))
            first = engine.execute("REPL DUMP shop")
            engine.execute(f"REPL LOAD shop FROM '{first.dump_dir}'")
            for page in range(3):
                source.catalog.add_partitions(
                    "shop", "t", [make_partition(table, f"{page}-{n:03d}") for n in range(20)]
                )
            event.listen(target.engine, "before_cursor_execute", seen)
            later = engine.execute(f"REPL DUMP shop FROM {first.last_event_id}")
            loaded = engine.execute(f"REPL LOAD shop FROM '{later.dump_dir}'")
            event.remove(target.engine, "before_cursor_execute", seen)
            assert loaded.events_applied == 3
            assert len(target.catalog.get_partition_names("shop", "t")) == 60
            assert (len(sent) >= 1) if backend == "postgres" else not sent, sent
        finally:
            target.close()
            source.close()


#: Rows a server read by scanning a table in full, so far in this session (MariaDB) or this transaction
#: (PostgreSQL, ``partitions`` only): what an index look-up does not count.
_SCANNED_ROWS = {
    "postgres": "SELECT seq_tup_read FROM pg_stat_xact_user_tables WHERE relname = 'partitions'",
    "mysql": "SHOW SESSION STATUS LIKE 'Handler_read_rnd_next'",
}


class ScanCounter:
    """Rows the look-ups of ``partitions`` (not its inserts) read by full scans: the server's counter before
    and after each such statement, on the statement's own connection."""

    def __init__(self, store: Metastore, backend: str) -> None:
        self.engine, self.query, self.rows = store.engine, _SCANNED_ROWS[backend], 0
        event.listen(self.engine, "before_cursor_execute", self._before)
        event.listen(self.engine, "after_cursor_execute", self._after)

    def _counter(self, conn: Connection) -> int:
        return int(conn.exec_driver_sql(self.query).one()[-1])

    def _before(self, conn: Connection, _cursor: object, statement: str, *_args: object) -> None:
        if _reads_partitions(statement):
            conn.info["scanned_before"] = self._counter(conn)

    def _after(self, conn: Connection, _cursor: object, statement: str, *_args: object) -> None:
        if _reads_partitions(statement):
            self.rows += self._counter(conn) - conn.info.pop("scanned_before")

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._before)
        event.remove(self.engine, "after_cursor_execute", self._after)


def _reads_partitions(statement: str) -> bool:
    """A look-up of ``partitions`` (the counters' own queries read other tables)."""
    return "FROM partitions" in statement and "INSERT" not in statement


@pytest.mark.parametrize("server", ["postgres", "mysql"])
@pytest.mark.parametrize("layout", ["at their level", "elsewhere in the table"])
def test_a_filling_transaction_looks_up_the_new_locations_without_reading_the_earlier_pages(
    tmp_path: Path, server: str, layout: str
) -> None:
    """Each page of new partitions is compared with the table's stored ones by location key. In a transaction
    that fills the table (a bootstrap's), no statistics describe the rows it added, and the look-up of a page's
    500 keys was planned as a full scan of every earlier page: a 100,000-partition table read about ten
    million rows in all. Each key is now an index probe: the look-ups read no page of ``partitions`` by a
    full scan (the servers' own counters). Partitions elsewhere than at their level (``table/p=v``) take another
    look-up, by key ranges: the same holds. SQLite plans each value of a list as its own probe already."""
    with temporary_database(server, str(tmp_path / "db")) as url:
        store = Metastore.open(make_config(url, tmp_path))
        try:
            store.catalog.create_database(Database(name="shop"))
            table = store.catalog.create_table(make_table("shop", "t", partition_keys=("p",)))
            scans = ScanCounter(store, server)
            try:
                with store.events.transaction():
                    with store.events.reader() as conn:
                        plan_for_growth(conn)
                    for first in range(0, 4000, 500):
                        page = [make_partition(table, f"{n:05d}") for n in range(first, first + 500)]
                        if layout != "at their level":
                            for n, part in enumerate(page, start=first):
                                part.sd.location = f"{table.sd.location}/custom/x{n:05d}"
                        store.catalog.add_partitions("shop", "t", page)
            finally:
                scans.close()
            # Less than one page: MariaDB's counter also counts the one-row ``dbs`` some look-ups join, read in
            # full (8 rows here); a scan of the earlier pages read 14,000.
            assert scans.rows < 500, f"{scans.rows} rows read by full scans in the look-ups of partitions"
            assert len(store.catalog.get_partition_names("shop", "t")) == 4000
        finally:
            store.close()


def _rows_discarded(plan: dict[str, Any]) -> int:
    """Rows a plan's nodes read and dropped (by a filter, or an index's recheck), over the whole tree."""
    own = int(plan.get("Rows Removed by Filter", 0)) + int(plan.get("Rows Removed by Index Recheck", 0))
    return own + sum(_rows_discarded(child) for child in plan.get("Plans", ()))


def _named_look_ups(store: Metastore, run: Callable[[], object]) -> list[tuple[str, dict[str, Any]]]:
    """The statements ``run`` sent that look partitions up by a list of names, with their parameters."""
    sent: list[tuple[str, dict[str, Any]]] = []

    def seen(_conn: object, _cursor: object, statement: str, parameters: Any, *_args: object) -> None:
        if "partitions" in statement and isinstance(parameters, dict) and "names" in parameters:
            sent.append((statement, dict(parameters)))

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        run()
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    return sent


def _explained(store: Metastore, statement: str, parameters: dict[str, Any]) -> dict[str, Any]:
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        [[explained]] = raw.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters).fetchall()
    return dict(explained[0]["Plan"])


@pytest.mark.postgres
def test_adding_pages_to_a_table_its_statistics_do_not_describe_reads_none_of_its_rows(
    tmp_path: Path,
) -> None:
    """A client adding partitions page by page to a new table (a Spark job, ``MSCK REPAIR``) commits each
    page; PostgreSQL's statistics describe the table as it was at its last analysis (autovacuum's comes a
    minute later at best). Each call looks up whether its names exist: planned from those statistics, ``= ANY``
    of 500 names read every row of the table, each compared with every name (700 ms a call at 22,000
    partitions, so the adds grew quadratically). Each name is now one probe of the unique (table, name)
    index. So is every other look-up of partitions by name (``partitions_named``): the documents a load reads
    before changing them (at once and in pages), the recorded listings a bootstrap dump writes. Each, run
    again under ``EXPLAIN ANALYZE`` on the grown table, reads and drops no row."""
    with temporary_database("postgres", str(tmp_path / "db")) as url:
        store = Metastore.open(make_config(url, tmp_path))
        try:
            store.catalog.create_database(Database(name="shop"))
            table = store.catalog.create_table(make_table("shop", "t", partition_keys=("p",)))
            store.catalog.add_partitions("shop", "t", [make_partition(table, f"a{n}") for n in range(5)])
            with store.engine.begin() as conn:
                conn.exec_driver_sql("ANALYZE partitions")  # statistics of a 5-partition table

            def add_pages() -> None:
                for first in range(0, 4000, 500):
                    page = [make_partition(table, f"{n:05d}") for n in range(first, first + 500)]
                    store.catalog.add_partitions("shop", "t", page)

            adds = _named_look_ups(store, add_pages)
            assert len(store.catalog.get_partition_names("shop", "t")) == 4005
            names = [f"p={n:05d}" for n in range(3500, 4000)]
            parts = store.catalog.get_partitions_by_names("shop", "t", names)
            assert len(parts) == 500
            reads = {
                "ids before an add": adds[-1:],
                "documents": _named_look_ups(
                    store, lambda: store.catalog.get_partitions_by_names("shop", "t", names)
                ),
                "documents in pages": _named_look_ups(
                    store,
                    lambda: list(store.catalog.get_partitions_by_names("shop", "t", names, page_rows=100)),
                ),
                "a dump's listings": _named_look_ups(
                    store, lambda: store.catalog.dump_partition_listings(table, parts)
                ),
                "recorded listings": _named_look_ups(
                    store, lambda: store.catalog.recorded_listings(table, parts)
                ),
            }
            for read, sent in reads.items():
                assert sent, f"{read}: no look-up by names was sent"
                for statement, parameters in sent:
                    # The plan from the 5-partition statistics read the 3,505 earlier rows and dropped each.
                    plan = _explained(store, statement, parameters)
                    assert _rows_discarded(plan) == 0, (read, plan)
        finally:
            store.close()


class _RolledBack(Exception):
    """Ends a transaction of the test by a rollback."""


@pytest.mark.postgres
def test_no_statement_of_the_metastore_is_compiled_by_the_jit(tmp_path: Path) -> None:
    """PostgreSQL compiles a statement with LLVM when the planner costs it high enough; the metastore's
    statements are short look-ups costed from the tables' sizes, and in a bootstrap's filling transaction the
    500-key location probe was compiled at every run (100-180 ms for a statement that reads nothing in 2 ms).
    Every connection of the metastore's pools runs with the JIT off, from its first transaction on, and still
    after its transactions ended (the setting is the session's): a statement made to cost enough to compile
    (``jit_above_cost`` 0) is not compiled."""
    with temporary_database("postgres", str(tmp_path / "db")) as url:
        store = Metastore.open(make_config(url, tmp_path))
        probe = "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM partitions WHERE part_name > ''"
        try:
            with store.engine.connect() as conn:
                jit_here = bool(conn.exec_driver_sql("SELECT pg_jit_available()").scalar_one())
            store.catalog.create_database(Database(name="shop"))
            for rolled_back in (True, False, False):
                with contextlib.suppress(_RolledBack), store.events.transaction() as tx:
                    tx.conn.exec_driver_sql("SET LOCAL jit_above_cost = 0")
                    assert tx.conn.exec_driver_sql("SHOW jit").scalar_one() == "off"
                    plan = tx.conn.exec_driver_sql(probe).scalar_one()
                    assert "JIT" not in json.dumps(plan), plan
                    if rolled_back:
                        raise _RolledBack
            with store.events.reader() as conn:
                assert conn.exec_driver_sql("SHOW jit").scalar_one() == "off"
        finally:
            store.close()
        if jit_here:  # the same statement on a connection of its own is compiled: the test can fail
            engine = create_engine(url)
            try:
                with engine.connect() as conn:
                    conn.exec_driver_sql("SET jit_above_cost = 0")
                    assert "JIT" in json.dumps(conn.exec_driver_sql(probe).scalar_one())
            finally:
                engine.dispose()
