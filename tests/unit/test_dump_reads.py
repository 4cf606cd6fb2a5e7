"""Reading a dump's files: bounded by the limits, and memory that follows the file, not the limit."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from hmsrepl.replication.layout import DumpDir, DumpError, DumpLimits


def _write_big_listing(dump: DumpDir, root: Path) -> int:
    """A listing of 60,000 files at ``db/big/_files``; returns its size (some 6 MB, six read chunks)."""
    dump.write_files(
        "db/big/_files", [f"/w/big/part-{i:07d}-{'x' * 60}#crc32c-00000001-8##" for i in range(60_000)]
    )
    return (root / "db/big/_files").stat().st_size


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


def test_a_listing_is_split_as_read_holding_its_lines_and_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing of 1,000,000 files is some 170 MB of bytes and as much of decoded text: a load reads it a
    chunk at a time, so its peak is the lines themselves. Lines cut by a chunk (even inside a character)
    come out whole."""
    monkeypatch.setattr("hmsrepl.replication.layout.READ_CHUNK", 7)
    dump = DumpDir(str(tmp_path))
    names = [f"/w/t/fé{i}-{'x' * (i % 13)}#crc32c-00000001-1##" for i in range(2_000)]
    dump.write_files("db/t/_files", names)
    (tmp_path / "db/t/_unterminated").write_bytes(b"/w/a\n\n/w/\xc3\xa9b")
    assert dump.read_files("db/t/_files") == names
    assert dump.read_files("db/t/_unterminated") == ["/w/a", "/w/éb"]
    monkeypatch.setattr("hmsrepl.replication.layout.READ_CHUNK", 1024 * 1024)
    size = _write_big_listing(dump, tmp_path)
    tracemalloc.start()
    try:
        dump.read_files("db/big/_files")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2.2 * size  # the lines (about 1.5 times the file) and one chunk: not bytes and text as well


def test_a_listing_over_the_limit_or_not_utf8_is_refused(tmp_path: Path) -> None:
    dump = DumpDir(str(tmp_path), DumpLimits(max_files_bytes=100))
    dump.write_files("db/t/_files", ["/w/t/f#crc32c-00000001-1##"] * 4)
    with pytest.raises(DumpError, match=r"larger than 100 bytes.*HMSREPL_DUMP_MAX_FILES_BYTES"):
        dump.read_files("db/t/_files")
    (tmp_path / "db/t/_files").write_bytes(b"/w/t/\xff\n")
    with pytest.raises(DumpError, match="not UTF-8 text"):
        dump.read_files("db/t/_files")


def test_a_listing_read_in_pages_holds_one_page_and_loses_no_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load takes a listing of 1,000,000 files a page at a time: every line comes once, in order, in pages
    of at most the page size (lines cut by a chunk too), and memory is a page, not the listing."""
    monkeypatch.setattr("hmsrepl.replication.layout.READ_CHUNK", 7)
    dump = DumpDir(str(tmp_path))
    names = [f"/w/t/fé{i}-{'x' * (i % 13)}#crc32c-00000001-1##" for i in range(2_345)]
    dump.write_files("db/t/_files", names)
    pages = list(dump.files_pages("db/t/_files", 1_000))
    assert [len(page) for page in pages] == [1_000, 1_000, 345]
    assert [line for page in pages for line in page] == names
    assert list(dump.files_pages("db/absent/_files")) == []
    monkeypatch.setattr("hmsrepl.replication.layout.READ_CHUNK", 1024 * 1024)
    size = _write_big_listing(dump, tmp_path)
    tracemalloc.start()
    try:
        assert sum(len(page) for page in dump.files_pages("db/big/_files", 5_000)) == 60_000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (
        peak < size
    )  # a chunk, its text and a page or two of lines: the listing's lines alone are 1.5x size
