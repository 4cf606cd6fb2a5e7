"""Rows written in bulk (PostgreSQL's COPY, executemany elsewhere) read back exactly and share the transaction."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from hmsrepl.metastore import Metastore, bulk_rows
from hmsrepl.metastore.listings import ROW_COLUMNS
from hmsrepl.metastore.schema import data_files
from hmsrepl.metastore.statement_counts import StatementCounter

# Values COPY's text format must escape (tab, newline, backslash, a literal \N) and ones it must not mangle.
AWKWARD_PATHS = ("a\tb", "line\nbreak", "back\\slash", "\\N", "ünïcødé/日本", "x" * 700, "  spaced  ")


def rows(count: int, tbl_id: int = 7) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for i in range(count):
        path = AWKWARD_PATHS[i] if i < len(AWKWARD_PATHS) else f"ds=2026-01-01/part-{i:06d}.parquet"
        version = None if i % 3 else f"v{i}"
        out.append((tbl_id, i % 2, path, i * 10, 1_700_000_000_000_000_000 + i, f"{i:08x}", version))
    return out


def stored(metastore: Metastore, tbl_id: int = 7) -> set[tuple[object, ...]]:
    columns = [data_files.c[name] for name in ROW_COLUMNS]
    with metastore.engine.connect() as conn:
        return {tuple(row) for row in conn.execute(select(*columns).where(data_files.c.tbl_id == tbl_id))}


@pytest.mark.parametrize("count", [3, bulk_rows.COPY_MIN_ROWS + 7])
def test_rows_written_in_bulk_read_back_exactly(metastore: Metastore, count: int) -> None:
    written = rows(count)
    with metastore.engine.begin() as conn:
        bulk_rows.insert_rows(conn, data_files, ROW_COLUMNS, written)
    assert stored(metastore) == set(written)


def test_rows_written_in_bulk_roll_back_with_their_transaction(metastore: Metastore) -> None:
    """The COPY goes through the driver's connection under SQLAlchemy's: a failed write leaves no row."""
    with pytest.raises(RuntimeError), metastore.engine.begin() as conn:
        bulk_rows.insert_rows(conn, data_files, ROW_COLUMNS, rows(bulk_rows.COPY_MIN_ROWS * 2))
        raise RuntimeError("the write fails after its rows went out")
    assert stored(metastore) == set()


def test_rows_written_in_bulk_outside_a_transaction_wait_for_its_commit(metastore: Metastore) -> None:
    """A connection that has not begun its transaction yet gets one: the rows do not commit on their own."""
    with metastore.engine.connect() as conn:
        bulk_rows.insert_rows(conn, data_files, ROW_COLUMNS, rows(bulk_rows.COPY_MIN_ROWS * 2))
        assert conn.in_transaction()
        conn.rollback()
    assert stored(metastore) == set()


def test_a_bulk_write_counts_as_one_statement(metastore: Metastore) -> None:
    """Statement counts (the benchmarks' round trips) see a COPY or a driver's executemany, which no statement
    event reports: one more than the transaction alone sends (SQLite's BEGIN is a statement of its own)."""
    counter = StatementCounter(metastore.engine)
    try:
        with counter.counting() as alone, metastore.engine.begin():
            pass
        with counter.counting() as counts, metastore.engine.begin() as conn:
            bulk_rows.insert_rows(conn, data_files, ROW_COLUMNS, rows(bulk_rows.COPY_MIN_ROWS * 3))
    finally:
        counter.close()
    if metastore.engine.dialect.name in ("postgresql", "sqlite"):
        assert counts.statements - alone.statements == 1
    else:  # SQLAlchemy's multi-row inserts
        assert counts.statements - alone.statements >= 1


def test_a_row_already_there_fails_the_bulk_write_as_sqlalchemy_reports_it(metastore: Metastore) -> None:
    """Callers catch SQLAlchemy's errors (the CLI's one-line errors, retries): the driver's own, raised by a COPY
    or an executemany, come as the same classes, and the transaction keeps none of the batch's rows."""
    first = rows(bulk_rows.COPY_MIN_ROWS)
    with metastore.engine.begin() as conn:
        bulk_rows.insert_rows(conn, data_files, ROW_COLUMNS, first)
    repeated = [*rows(bulk_rows.COPY_MIN_ROWS + 5, tbl_id=8), first[3]]
    with pytest.raises(IntegrityError), metastore.engine.begin() as conn:
        bulk_rows.insert_rows(conn, data_files, ROW_COLUMNS, repeated)
    assert stored(metastore) == set(first)
    assert stored(metastore, tbl_id=8) == set()
