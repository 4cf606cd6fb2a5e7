"""A position-delete file's rows name the replica's data files after the rewrite, in order, ids kept."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hmsrepl.replication.iceberg_deletes import FILE_PATH_FIELD_ID, entry_updates, rewrite_position_deletes

SOURCE, REPLICA = "/src/wh/db.db/t", "/dst/wh/db_dr.db/t.hmsrepl-v7"


def delete_file(paths: list[str], positions: list[int]) -> bytes:
    """A position-delete file as Iceberg writers lay it out: reserved field ids on both columns."""
    schema = pa.schema(
        [
            pa.field(
                "file_path", pa.string(), False, {b"PARQUET:field_id": str(FILE_PATH_FIELD_ID).encode()}
            ),
            pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"}),
        ]
    )
    out = io.BytesIO()
    pq.write_table(pa.table([pa.array(paths), pa.array(positions, pa.int64())], schema=schema), out)
    return out.getvalue()


def test_every_path_is_renamed_and_the_rows_keep_their_order_and_field_ids() -> None:
    paths = [f"{SOURCE}/data/a.parquet", f"{SOURCE}/data/a.parquet", f"{SOURCE}/data/b.parquet"]
    renamed = rewrite_position_deletes(delete_file(paths, [0, 4, 1]), lambda p: p.replace(SOURCE, REPLICA))
    table = pq.read_table(io.BytesIO(renamed))
    assert table.column("file_path").to_pylist() == [
        f"{REPLICA}/data/a.parquet",
        f"{REPLICA}/data/a.parquet",
        f"{REPLICA}/data/b.parquet",
    ]
    assert table.column("pos").to_pylist() == [0, 4, 1]
    ids = [
        pq.ParquetFile(io.BytesIO(renamed)).schema_arrow.field(i).metadata[b"PARQUET:field_id"]
        for i in (0, 1)
    ]
    assert ids == [str(FILE_PATH_FIELD_ID).encode(), b"2147483545"]


def test_a_file_without_a_file_path_column_is_refused() -> None:
    out = io.BytesIO()
    pq.write_table(pa.table({"pos": [1]}), out)
    with pytest.raises(ValueError, match="file_path"):
        rewrite_position_deletes(out.getvalue(), str)


def test_the_entry_loses_the_source_path_bounds_and_split_offsets() -> None:
    lower = {FILE_PATH_FIELD_ID: b"/src/a", 2147483545: b"\x00"}
    updates = entry_updates(123, lower, None)
    assert updates == {
        "file_size_in_bytes": 123,
        "split_offsets": None,
        "lower_bounds": {2147483545: b"\x00"},
        "upper_bounds": None,
    }
