"""The rows a reader of an insert-only location sees, as an order-free digest: how ``repl verify`` compares an
ACID location whose two sides hold the same rows in different files.

A compaction is not replicated: each side compacts on its own schedule, so at any moment one side may read a
``base_<wid>_v<txn>`` (or a minor compaction's ``delta_<min>_<max>_v<txn>``) where the other reads the
deltas it was made of. What a reader of an insert-only table sees is the multiset of rows of the visible
files, whatever directories hold them; so the sides are equal when, in order:

1. the visible files have the same relative paths and checksums (no compaction on either side, or the same);
2. the visible files have the same checksums, wherever they are (the copy engine moves files as they are);
3. the visible files hold the same rows, counted with repetition (a Spark compaction rewrote them): text
   formats (lines), Parquet and ORC (pyarrow) are read here; other formats cannot be compared this way and
   stay reported as different, naming the fix.

A full ACID table's rows are not read at all: its ``delete_delta_*`` directories hide rows of its deltas by
ROW__ID, which only an ACID reader merges; such a location is reported as different, saying so.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hmsrepl.metastore.model import Table
from hmsrepl.storage.rooted import RootedFileSystem

LINE_FORMATS = frozenset({"csv", "text", "json"})
"""Hive text tables (delimited, JSON): one row per line."""
COLUMNAR_FORMATS = frozenset({"parquet", "orc"})
_MASK = (1 << 128) - 1


@dataclass(frozen=True)
class RowDigest:
    """An order-free digest of a multiset of rows: their count and the sum of their hashes."""

    rows: int
    digest: int

    @classmethod
    def of(cls, rows: Iterable[bytes]) -> RowDigest:
        count = total = 0
        for row in rows:
            count += 1
            total = (total + int.from_bytes(hashlib.sha256(row).digest()[:16], "big")) & _MASK
        return cls(count, total)

    def __add__(self, other: RowDigest) -> RowDigest:
        return RowDigest(self.rows + other.rows, (self.digest + other.digest) & _MASK)


RowReader = Callable[[], "RowDigest | str"]
"""Reads a location's visible rows: their digest, or why they cannot be read here (one line)."""


def table_format(table: Table) -> str | None:
    """The data source name of the table's files (``acid.spark.spark_format``, no Spark needed), or None."""
    from hmsrepl.acid.spark import spark_format  # imports PySpark only inside its functions

    try:
        return spark_format(table).name
    except Exception:  # an input format without a mapping: rows cannot be read here
        return None


def row_reader(fs: RootedFileSystem, table: Table, uris: Sequence[str]) -> RowReader:
    """A reader of the rows of ``uris`` (visible data files of one location of ``table``, read through the
    metastore's rooted file system), run on demand."""
    fmt = table_format(table)

    def read() -> RowDigest | str:
        if not table.is_insert_only:  # a full ACID table's rows are its deltas minus its delete deltas
            return (
                f"rows of full ACID table '{table.qualified_name}' cannot be compared here: its delete deltas "
                "are not merged by this reader; compare them with a Hive or Spark ACID reader"
            )
        if fmt not in LINE_FORMATS | COLUMNAR_FORMATS:
            return (
                f"rows of format '{fmt or table.sd.input_format}' cannot be compared here; compact both sides "
                "(or neither) and verify again"
            )
        total = RowDigest(0, 0)
        for uri in uris:
            with fs.open_read(uri) as stream:
                data = stream.read()
            try:
                total = total + RowDigest.of(_rows(fmt, data))
            except Exception as exc:  # not a file of the table's format: say so, do not fail verify
                return f"'{uri}' could not be read as {fmt}: {type(exc).__name__}: {exc}"
        return total

    return read


def _rows(fmt: str, data: bytes) -> Iterable[bytes]:
    if fmt in LINE_FORMATS:
        return (line for line in data.split(b"\n") if line)
    table = _columnar(fmt, data)
    names = sorted(table.column_names, key=str.lower)
    columns = [table.column(name).to_pylist() for name in names]
    return (repr(tuple(column[i] for column in columns)).encode() for i in range(table.num_rows))


def _columnar(fmt: str, data: bytes) -> Any:
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(pa.BufferReader(data))
    import pyarrow.orc as orc

    return orc.ORCFile(io.BytesIO(data)).read()
