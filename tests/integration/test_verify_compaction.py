"""``repl verify`` compares what readers see of an ACID table, not how each side's compactor laid it out.

A compaction is not replicated, so one side may read a base where the other reads deltas. Equal rows in
other files are equal (the copy engine's same files; a rewrite's same rows, counted with repetition); a row
changed on one side is still a difference, and so is a format whose rows cannot be read here.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.acid.spark import FORMAT_PARAMETER
from hmsrepl.metastore.model import Table
from hmsrepl.replication.acid_content import RowDigest, row_reader
from hmsrepl.replication.verify import verify
from hmsrepl.storage import filesystem_for
from hmsrepl.storage.base import join_uri
from hmsrepl.storage.rooted import RootedFileSystem
from tests.helpers import make_table
from tests.integration.test_acid_replication import (  # noqa: F401 - fixtures
    ACID,
    bootstrap,
    engine,
    source,
    step,
    target,
    write,
)


def merging_rewriter(table: Table, inputs: Sequence[str], output: str, fs: RootedFileSystem) -> None:
    """What a Spark compaction does to a text table: every row of the inputs in one new file, reordered."""
    rows: list[bytes] = []
    for uri in inputs:
        with fs.open_read(uri) as stream:
            rows += stream.read().splitlines()
    fs.write_bytes(join_uri(output, "part-00000"), b"\n".join(sorted(rows, reverse=True)))


@pytest.mark.parametrize("backend", ["sqlite"])  # what the backend does here is tested elsewhere
def test_a_table_compacted_on_one_side_only_verifies_equal_by_content(engine, source, target) -> None:  # noqa: F811
    source.catalog.create_table(make_table("sales", "lines", **{**ACID, FORMAT_PARAMETER: "text"}))
    for n in range(3):
        write(source, "lines", f"early {n}\nearly {n}".encode())  # a row twice: counted twice
    bootstrap(engine)
    for n in range(3):
        write(source, "lines", f"late {n}".encode())
    step(engine, None)
    assert verify(source, "sales", target, "sales_dr") == []

    run_cycle(source, table="sales.lines", force=True, cleaner_delay_seconds=0)  # copy engine: same files
    assert verify(source, "sales", target, "sales_dr") == []

    run_cycle(target, table="sales_dr.lines", force=True, cleaner_delay_seconds=0, rewriter=merging_rewriter)
    assert verify(source, "sales", target, "sales_dr") == []  # other files, same rows

    location = target.catalog.get_table("sales_dr", "lines").sd.location
    [base] = [name for name in os.listdir(location) if name.startswith("base_")]
    rewritten = join_uri(location, base, "part-00000")
    data = filesystem_for(rewritten).open_read(rewritten).read()
    filesystem_for(rewritten).write_bytes(rewritten, data.replace(b"early 1", b"early 9", 1))
    [difference] = verify(source, "sales", target, "sales_dr")
    assert "table lines: files differ" in difference and "rows differ too (source 9, replica 9)" in difference


def _parquet(rows: list[tuple[int, str]]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": [r[0] for r in rows], "name": [r[1] for r in rows]}), out)
    return out.getvalue()


def test_parquet_rows_are_compared_whatever_files_hold_them(tmp_path) -> None:
    table = make_table("sales", "orders", **ACID)  # Parquet input format
    deltas = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    deltas[0].write_bytes(_parquet([(1, "x"), (2, "y")]))
    deltas[1].write_bytes(_parquet([(2, "y")]))
    merged = tmp_path / "merged.parquet"
    merged.write_bytes(_parquet([(2, "y"), (1, "x"), (2, "y")]))
    changed = tmp_path / "changed.parquet"
    changed.write_bytes(_parquet([(2, "y"), (1, "x"), (3, "y")]))

    fs = RootedFileSystem([str(tmp_path)], purpose="test")
    two = row_reader(fs, table, [str(p) for p in deltas])()
    assert isinstance(two, RowDigest) and two.rows == 3
    assert row_reader(fs, table, [str(merged)])() == two
    assert row_reader(fs, table, [str(changed)])() != two
    avro = table.model_copy(update={"parameters": {**ACID, FORMAT_PARAMETER: "avro"}})
    assert "cannot be compared here" in str(row_reader(fs, avro, [str(merged)])())
