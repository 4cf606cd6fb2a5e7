"""A big partition's first capture on the source and its bootstrap dump walk its listing a page at a time.

What a user relies on: the source registering a partition whose directory holds 1,000,000 files, and a
bootstrap dump of it, stay within memory that does not grow with the listing (the goal is 400 MB at a
million); the event the capture logs and the ``_files`` the dump writes are exactly what the whole-listing
paths write, in the same order on every backend (file names sorted by code point, whatever the database's
collation); a dump still lists what changed behind the metastore's back: files removed or rewritten, and
files it never recorded.
"""

from __future__ import annotations

import os
import traceback
import tracemalloc
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from hmsrepl.formats import json_text
from hmsrepl.metastore import Metastore, capture, listings, recorded_pages
from hmsrepl.metastore.catalog.rows import partition_ids_named
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.listings import FileRecord, ObjectKey
from hmsrepl.metastore.model import Partition
from hmsrepl.replication.dump import DumpResult
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpError
from hmsrepl.storage.base import FileIdentity
from hmsrepl.storage.local import local_path
from hmsrepl.storage.rooted import RootedFileSystem
from tests.helpers import (
    create_db_and_table,
    listing_lookups,
    make_partition,
    one_partition_directory,
    open_store,
    settle,
    statements_sent,
    write_file,
)

#: Names whose code point order differs from a locale's, a case-folding or a padding collation's.
NAMES = [
    "B.parquet",
    "a.parquet",
    "a b.parquet",
    "a-b.parquet",
    "a.b.parquet",
    "a/b.parquet",
    "a\u00e9.parquet",
    "a\u65e5.parquet",
    "Z.parquet",
    "z.parquet",
    "a!.parquet",
    "a .parquet",
    *(f"part-{i:05d}.parquet" for i in range(12)),
]


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of a few files, so a listing of two dozen is walked in several."""
    monkeypatch.setattr(capture, "WALK_PAGE", 4)
    monkeypatch.setattr(recorded_pages, "LONG_LISTING", 5)
    monkeypatch.setattr(recorded_pages, "PAGE", 3)
    monkeypatch.setattr("hmsrepl.metastore.catalog.data.LONG_LISTING", 5)


def captured(store: Metastore, names: Iterable[str]) -> tuple[Partition, list[str]]:
    """Partition ``big.t/p=a`` holding ``names``, captured by an INSERT naming no files; its event's files."""
    part, _ = one_partition_directory(store, "big")
    location = part.sd.location or ""
    for index, name in enumerate(names):
        write_file(location, name, index.to_bytes(8, "big"))
    settle()
    before = store.events.current_event_id()
    store.catalog.insert("big", "t", ["a"])
    [event] = store.events.next_events(before)
    body = parse_event(event).body
    assert body.new_files == list(body.data.added)
    return part, list(body.data.added)


def walked(store: Metastore, part: Partition) -> recorded_pages.RecordedPages:
    table = store.catalog.get_table("big", "t")
    [listing] = store.catalog.dump_partition_listings(table, [part])
    assert isinstance(listing, recorded_pages.RecordedPages)
    return listing


def lines(listing: Iterable[list[str]]) -> list[str]:
    return [line for page in listing for line in page]


def dumped(store: Metastore, tmp_path: Path) -> DumpResult:
    """REPL DUMP of database ``big`` under ``tmp_path``."""
    replica = open_store(tmp_path, "replica")
    try:
        result = ReplicationEngine(str(tmp_path / "dumps"), store, replica).execute("REPL DUMP big")
    finally:
        replica.close()
    assert isinstance(result, DumpResult)
    return result


def dumped_files(store: Metastore, tmp_path: Path, where: str = "t/p=a") -> tuple[str, int]:
    """REPL DUMP of database ``big``: the ``_files`` text of its object ``where`` and the files it counted."""
    result = dumped(store, tmp_path)
    return (Path(local_path(result.dump_dir)) / "big" / where / "_files").read_text(), result.files


def test_a_first_capture_and_a_dump_walked_in_pages_write_the_whole_listings_bytes(
    metastore: Metastore, tmp_path: Path, small_pages: None
) -> None:
    part, added = captured(metastore, NAMES)
    table = metastore.catalog.get_table("big", "t")
    whole = metastore.catalog.describe_data(table, part)  # the whole-listing path, sorted in Python
    assert added == whole
    assert [name.split("#")[0].rsplit("/p=a/", 1)[1] for name in whole] == sorted(NAMES)

    listing = walked(metastore, part)
    assert lines(listing) == whole
    assert listing.written == len(NAMES) and listing.written_bytes == 8 * len(NAMES)
    text, counted = dumped_files(metastore, tmp_path)
    assert text == "".join(f"{line}\n" for line in whole)
    assert counted == len(NAMES)


def test_an_unpartitioned_tables_long_listing_is_walked_and_written_as_held(
    sqlite_metastore: Metastore, tmp_path: Path, small_pages: None
) -> None:
    table = create_db_and_table(sqlite_metastore, "big", "u")
    for index, name in enumerate(NAMES):
        write_file(table.sd.location or "", name, index.to_bytes(8, "big"))
    settle()
    sqlite_metastore.catalog.insert("big", "u")
    table = sqlite_metastore.catalog.get_table("big", "u")
    listing = sqlite_metastore.catalog.dump_listing(table)
    assert isinstance(listing, recorded_pages.RecordedPages)
    whole = sqlite_metastore.catalog.describe_data(table)
    assert lines(listing) == whole and len(whole) == len(NAMES)
    text, counted = dumped_files(sqlite_metastore, tmp_path, "u")
    assert text == "".join(f"{line}\n" for line in whole)
    assert counted == len(NAMES)


def test_a_dump_walked_in_pages_lists_files_changed_behind_the_metastores_back(
    sqlite_metastore: Metastore, tmp_path: Path, small_pages: None
) -> None:
    part, _ = captured(sqlite_metastore, NAMES)
    location = part.sd.location or ""
    directory = Path(local_path(location))
    (directory / "part-00003.parquet").unlink()
    write_file(location, "part-00005.parquet", b"rewritten, longer")
    table = sqlite_metastore.catalog.get_table("big", "t")
    whole = sqlite_metastore.catalog.describe_data(table, part)
    assert lines(walked(sqlite_metastore, part)) == whole
    assert len(whole) == len(NAMES) - 1 and any("crc32c-" in line and "-17#" in line for line in whole)

    write_file(location, "dropped-by-hand.parquet", b"never recorded")
    whole = sqlite_metastore.catalog.describe_data(table, part)
    with pytest.raises(recorded_pages.UnrecordedFilesError):
        lines(walked(sqlite_metastore, part))
    text, counted = dumped_files(sqlite_metastore, tmp_path)  # described whole, as before
    assert text == "".join(f"{line}\n" for line in whole)
    assert counted == len(NAMES)


def test_an_overwrite_naming_no_files_of_a_long_listing_recycles_every_file_as_before(
    sqlite_metastore: Metastore, small_pages: None
) -> None:
    """An INSERT OVERWRITE that names no file leaves none in the listing: the first capture is not walked
    into a listing of the files it replaces."""
    part, _ = one_partition_directory(sqlite_metastore, "big")
    for index, name in enumerate(NAMES[-12:]):
        write_file(part.sd.location or "", name, index.to_bytes(8, "big"))
    settle()
    before = sqlite_metastore.events.current_event_id()
    sqlite_metastore.catalog.insert("big", "t", ["a"], replace=True)
    [event] = sqlite_metastore.events.next_events(before)
    body = parse_event(event).body
    assert body.data.complete and body.data.count == 0 and not body.data.added
    assert len(body.recycled) == 12


def test_a_dump_stopped_while_it_walks_a_listing_is_never_loaded(
    sqlite_metastore: Metastore, tmp_path: Path, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dump that stops part way through a listing's walk (its ``_files`` half written) is not acknowledged:
    a load refuses it, and nothing reaches the replica."""
    captured(sqlite_metastore, NAMES)
    pages = 0
    walk = recorded_pages.RecordedPages._encode

    def stop_at_second_page(self: recorded_pages.RecordedPages, *args: object) -> list[str]:
        nonlocal pages
        pages += 1
        if pages == 2:
            raise OSError("the disk went away")
        return walk(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(recorded_pages.RecordedPages, "_encode", stop_at_second_page)
    replica = open_store(tmp_path, "replica")
    engine = ReplicationEngine(str(tmp_path / "dumps"), sqlite_metastore, replica)
    try:
        with pytest.raises(OSError):
            engine.execute("REPL DUMP big")
        [left] = list((tmp_path / "dumps").iterdir())
        assert (left / "big" / "t" / "p=a" / "_files").exists()  # written in part
        with pytest.raises(DumpError):  # no metadata nor acknowledgement yet: not a dump to load
            engine.execute(f"REPL LOAD big FROM '{left}'")
        assert "big" not in replica.catalog.get_databases()
    finally:
        replica.close()


# -- memory: 50,000 files in pages of 2,000, none on disk (what is measured is the listing's bookkeeping) ----
# The product's pages are 10,000 files; a quarter of a 200,000-file listing in pages a fifth as long keeps the
# ratio between a page and the listing, in a quarter of the time (tracemalloc slows every allocation).
COUNT = 50_000
PAGE = 2_000
#: What a run holds whatever the listing's length (statements compiled, caches filled): 3.5-4.2 MB peaks here,
#: against 23-60 MB with the listing walked, recorded or streamed as one page.
FIXED = 2_000_000


def name(i: int) -> str:
    return f"part-{i:07d}-c000.snappy.parquet"


def token(i: int) -> str:
    return f"crc32c-{i:08x}-8"


def without_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """The partition's files as the metastore would find them, without 50,000 of them on disk: listed in
    pages of ``PAGE``, stated as recorded, identified by their index, pinned nowhere."""
    monkeypatch.setattr(capture, "WALK_PAGE", PAGE)
    monkeypatch.setattr(recorded_pages, "PAGE", PAGE)
    monkeypatch.setattr(listings, "STREAM_ROWS", PAGE)
    monkeypatch.setattr(json_text, "PIECE_ITEMS", PAGE)

    def stat_pages(self: RootedFileSystem, uri: str, page: int) -> Iterator[dict[str, tuple[int, int]]]:
        for start in range(0, COUNT, page):
            yield {name(i): (8, 1_000_000_000) for i in range(start, min(start + page, COUNT))}

    def identify(fs: RootedFileSystem, location: str, rels: list[str]) -> list[FileIdentity]:
        return [FileIdentity(token(int(rel[5:12]))) for rel in rels]

    monkeypatch.setattr(RootedFileSystem, "stat_pages", stat_pages)
    monkeypatch.setattr(
        RootedFileSystem, "stat_named", lambda self, uri, rels: dict.fromkeys(rels, (8, 10**9))
    )
    monkeypatch.setattr(RootedFileSystem, "count_files", lambda self, uri: COUNT)
    monkeypatch.setattr(capture, "_identify", identify)
    monkeypatch.setattr(ChangeManager, "pin", lambda self, encoded: 0)


def peak_of(action: Iterator[None], store: Metastore) -> int:
    """Bytes traced at the peak of ``action`` (a generator run to its end on ``store``), measured in a child
    forked for it.

    tracemalloc counts every thread's allocations, and a test worker is a long-lived process: the same dump
    peaked at 11.1 MB late in a run against 3.5-4.2 MB on its own. The child has this thread alone, with the
    worker's modules and the test's patches; its writes land in the same database and directories."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.close(read_end)
            store.engine.dispose(close=False)  # the parent's pooled connections stay the parent's
            tracemalloc.start()
            for _ in action:
                pass
            os.write(write_end, str(tracemalloc.get_traced_memory()[1]).encode())
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        peak = answer.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and peak, "the measured action failed (its traceback above)"
    return int(peak)


def test_a_first_capture_of_a_long_listing_holds_a_page_not_the_listing(
    sqlite_metastore: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_partition_directory(sqlite_metastore, "big")
    without_files(monkeypatch)
    before = sqlite_metastore.events.current_event_id()

    def insert() -> Iterator[None]:
        sqlite_metastore.catalog.insert("big", "t", ["a"])
        yield

    peak = peak_of(insert(), sqlite_metastore)
    # What a page costs (its stats, records, encoded files and their statement: some 1,500 bytes a file)
    # plus a few bytes a file (the compressed event): the listing held whole (its stats, its sorted paths,
    # its encoded files, each some 100 bytes a file) passes this by far.
    assert peak < FIXED + PAGE * 1_500 + 30 * COUNT, (
        f"capturing {COUNT:,} files held {peak:,} bytes at the peak"
    )
    [event] = sqlite_metastore.events.next_events(before)
    data = parse_event(event).body.data
    assert data.complete and data.count == len(data.added) == COUNT
    assert data.added[0].split("#")[1] == token(0)
    assert data.added[-1].split("#")[0].endswith(f"/p=a/{name(COUNT - 1)}")


def test_a_dump_of_a_long_recorded_listing_holds_a_page_not_the_listing(
    sqlite_metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_partition_directory(sqlite_metastore, "big")
    without_files(monkeypatch)
    table = sqlite_metastore.catalog.get_table("big", "t")
    assert table.id is not None
    with sqlite_metastore.events.transaction() as tx:
        [part_id] = partition_ids_named(tx.conn, table.id, ["p=a"]).values()
        records = (FileRecord(name(i), 8, 10**9, token(i)) for i in range(COUNT))
        listings.apply(tx.conn, ObjectKey(table.id, part_id), records)

    def dump() -> Iterator[None]:
        yield
        assert dumped(sqlite_metastore, tmp_path).files == COUNT

    peak = peak_of(dump(), sqlite_metastore)
    # A page of records, stats and encoded files (some 1,000 bytes a file): the listing held whole (its
    # records, its stats and its encoded files, then its text) passes this by far.
    assert peak < FIXED + PAGE * 1_500 + 10 * COUNT, (
        f"dumping {COUNT:,} files held {peak:,} bytes at the peak"
    )
    [directory] = (tmp_path / "dumps").iterdir()
    text = (directory / "big" / "t" / "p=a" / "_files").read_text()
    assert text.count("\n") == COUNT and f"/p=a/{name(COUNT - 1)}#{token(COUNT - 1)}#" in text


def test_one_read_tells_long_listings_from_short_ones_and_empty_ones(
    metastore: Metastore, small_pages: None
) -> None:
    """A bootstrap dump's page of partitions: the long recorded listing is walked in pages, the short one
    is held as recorded, the partition with nothing recorded lists nothing, each in its own place."""
    long_part, _ = captured(metastore, NAMES)
    table = metastore.catalog.get_table("big", "t")
    short_part, empty_part = metastore.catalog.add_partitions(
        "big", "t", [make_partition(table, "b"), make_partition(table, "c")]
    )
    for name in ("x.parquet", "y.parquet"):
        write_file(short_part.sd.location or "", name, name.encode())
    settle()
    metastore.catalog.insert("big", "t", ["b"])
    parts = [short_part, long_part, empty_part]
    out = metastore.catalog.dump_partition_listings(table, parts)
    assert [type(listing).__name__ for listing in out] == ["list", "RecordedPages", "list"]
    assert out[0] == metastore.catalog.describe_data(table, short_part) and len(out[0]) == 2
    assert lines(out[1]) == metastore.catalog.describe_data(table, long_part)
    assert out[2] == []


def test_a_first_capture_of_several_batches_looks_up_none_of_its_paths(
    metastore: Metastore, small_pages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first capture fills the partition's empty listing batch by batch, and its walk names each file once,
    so no batch's paths are looked up in what the batches before it recorded. On PostgreSQL those look-ups,
    in a listing filled by the same transaction and so without statistics, scanned all of it: the source's
    first capture of 100,000 files took 246 s (25,000: 18.8 s), and one of 1,000,000 did not end in 9 minutes
    even with each look-up planned for the listing's size. The listing and its event are the whole one's."""
    monkeypatch.setattr(capture, "BATCH", 5)
    with statements_sent(metastore.engine) as sent:
        part, added = captured(metastore, NAMES)
    inserts = [statement for statement in sent if statement.startswith("INSERT INTO data_files")]
    assert len(inserts) >= 2, "the capture recorded its listing in several batches"
    assert listing_lookups(sent) == [], "the capture looked up the paths of its own new listing"
    table = metastore.catalog.get_table("big", "t")
    assert added == metastore.catalog.describe_data(table, part)
    assert len(added) == len(NAMES)
