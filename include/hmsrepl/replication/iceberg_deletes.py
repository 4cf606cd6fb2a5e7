"""Position-delete files of an Iceberg table, rewritten to name the replica's copies of the data files.

A position-delete file (Iceberg format v2, what Trino's and Spark's row-level DELETE write) is a Parquet file
whose rows are ``(file_path, pos)``: each names a data file by absolute path. The replica's data files have
other paths, so a copy byte for byte would delete nothing there (a reader matches the paths exactly). The
rows are rewritten with the same renaming as the manifests' paths; the order stays sorted by
``(file_path, pos)`` as the spec requires, because the renaming swaps one common prefix. Columns are kept
with their Parquet field ids (Iceberg readers resolve columns by id). The manifest entry of the rewritten
file then needs its new size, no split offsets (row groups moved), and no ``file_path`` bounds (they named
source paths; bounds are optional, a reader then only reads the file).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

FILE_PATH_FIELD_ID = 2147483546  # the reserved field id of a position-delete file's ``file_path``
FILE_PATH = "file_path"


def rewrite_position_deletes(data: bytes, rename: Callable[[str], str]) -> bytes:
    """The Parquet bytes of a position-delete file with every ``file_path`` renamed by ``rename``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    at = table.schema.get_field_index(FILE_PATH)
    if at < 0:
        raise ValueError(f"no '{FILE_PATH}' column")
    renamed: dict[str, str] = {}
    paths = [None if p is None else renamed.setdefault(p, rename(p)) for p in table.column(at).to_pylist()]
    field = table.schema.field(at)
    table = table.set_column(at, field, pa.array(paths, field.type))
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def entry_updates(size: int, lower: dict[int, Any] | None, upper: dict[int, Any] | None) -> dict[str, Any]:
    """The manifest entry fields (by name) of a rewritten delete file of ``size`` bytes."""

    def without_paths(bounds: dict[int, Any] | None) -> dict[int, Any] | None:
        return None if bounds is None else {k: v for k, v in bounds.items() if k != FILE_PATH_FIELD_ID}

    return {
        "file_size_in_bytes": size,
        "split_offsets": None,
        "lower_bounds": without_paths(lower),
        "upper_bounds": without_paths(upper),
    }
