"""Reading a dump's files: bounded by the limits, and memory that follows the file, not the limit."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from hmsrepl.replication.layout import DumpDir, DumpError, DumpLimits


def test_a_small_dump_file_is_read_without_allocating_the_limit(tmp_path: Path) -> None:
    dump = DumpDir(str(tmp_path))
    dump.write_json("db/_metadata", {"database": {"name": "sales"}})
    dump.write_files("db/t/_files", [f"/w/t/f{i}#crc32c-00000001-1##" for i in range(100)])
    tracemalloc.start()
    try:
        assert dump.read_json("db/_metadata") == {"database": {"name": "sales"}}
        assert len(dump.read_files("db/t/_files")) == 100
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024  # the limits are 256 MiB and 1 GiB


def test_a_dump_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    limits = DumpLimits(max_metadata_bytes=3 * 1024 * 1024 + 10)
    dump = DumpDir(str(tmp_path), limits)
    dump.write_json("db/_metadata", {"blob": "x" * (3 * 1024 * 1024)})  # over several read chunks
    with pytest.raises(DumpError, match=r"larger than 3145738 bytes.*HMSREPL_DUMP_MAX_METADATA_BYTES"):
        dump.read_json("db/_metadata")
    dump.write_json("db/_metadata", {"blob": "x" * (3 * 1024 * 1024 - 20)})
    assert len(dump.read_json("db/_metadata")["blob"]) == 3 * 1024 * 1024 - 20
