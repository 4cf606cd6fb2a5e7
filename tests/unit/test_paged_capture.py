"""A new partition's listing published from a dump's pages is recorded, and logged, a page at a time.

What a user relies on: a bootstrap load of a partition of 1,000,000 files records every file and logs the
replica's own event naming every one of them, within memory that does not grow with the listing (the goal is
400 MB at a million); that event reads back from the replica's own log however long it is, while a message
from elsewhere stays within the inflate limits; and a listing that changes between the walks fails the write
with nothing recorded or logged.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from hmsrepl.formats import json_text, listing_digest
from hmsrepl.formats.bounded import MessageLimitError
from hmsrepl.metastore import Metastore, bulk_rows, listings, recorded_pages
from hmsrepl.metastore.applied_files import ListingChangedError, ListingPages
from hmsrepl.metastore.catalog.rows import partition_ids_named
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import LoggedEvent, NotificationEvent
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.model import Partition
from hmsrepl.metastore.schema import data_files
from tests.helpers import create_db_and_table, listing_lookups, make_partition, open_store, statements_sent

PAGE = 10_000
#: What a run holds whatever the listing's length (statements compiled, caches filled): a 4.0 MB peak in the
#: memory test, against 36 MB with the listing recorded as one page.
FIXED = 2_000_000


def line(i: int) -> str:
    """The dump's entry of source file ``i`` (8 bytes, as the million-file bench writes them)."""
    return f"file:/src/wh/big.db/t/p=a/part-{i:07d}-c000.snappy.parquet#crc32c-{i:08x}-8##"


def listing(
    count: int, changed_at: int | None = None, repeats: dict[int, int] | None = None, page: int = PAGE
) -> ListingPages:
    """``count`` entries in pages, made again for each walk; ``changed_at``: from the second walk on, that
    entry names another file (a dump rewritten under the load); ``repeats``: entry -> the earlier entry whose
    file it names again."""
    walks = 0

    def read() -> Iterator[list[str]]:
        nonlocal walks
        walks += 1
        for start in range(0, count, page):
            lines = [line((repeats or {}).get(i, i)) for i in range(start, min(start + page, count))]
            if changed_at is not None and walks > 1 and start <= changed_at < start + page:
                lines[changed_at - start] = line(count + 1)
            yield lines

    return ListingPages(read, "big/t/p=a/_files")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Metastore]:
    # The files are not written (what is measured is the listing's bookkeeping, not 200,000 files on disk):
    # each is recorded as a file to read again, and nothing is there to pin.
    monkeypatch.setattr(ChangeManager, "pin", lambda self, encoded: 0)
    opened = open_store(tmp_path, "replica")
    create_db_and_table(opened, "big", "t", partition_keys=("p",))
    try:
        yield opened
    finally:
        opened.close()


def new_partition(store: Metastore) -> Partition:
    table = store.catalog.get_table("big", "t")
    return make_partition(table, "a")


def add(store: Metastore, pages: ListingPages) -> Partition:
    [added] = store.catalog.add_partitions("big", "t", [new_partition(store)], applied_files=[pages])
    return added


def recorded(store: Metastore) -> listings.Summary:
    table = store.catalog.get_table("big", "t")
    assert table.id is not None
    with store.events.reader() as conn:
        [part_id] = partition_ids_named(conn, table.id, ["p=a"]).values()
        return listings.summary(conn, ObjectKey(table.id, part_id))


def test_a_long_listing_is_recorded_and_logged_in_memory_that_does_not_grow_with_it(
    store: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A quarter of a 200,000-file listing in pages a fifth as long as the dump's: the ratio between a page and
    # the listing is kept, in a quarter of the time (tracemalloc slows every allocation).
    count, page = 50_000, PAGE // 5
    monkeypatch.setattr(recorded_pages, "PAGE", page)
    monkeypatch.setattr(json_text, "PIECE_ITEMS", page)
    before = store.events.current_event_id()
    tracemalloc.start()
    try:
        part = add(store, listing(count, page=page))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # What a page costs (its lines, its paths and checksums, its records and their statement: some 1,500
    # bytes a file) plus a few bytes a file (the compressed event): the listing held whole (its lines alone
    # are some 150 bytes a file, the replica's encoded listing as much again) passes this by far.
    assert peak < FIXED + page * 1_500 + 30 * count, (
        f"recording {count:,} files held {peak:,} bytes at the peak"
    )

    summary = recorded(store)
    assert summary.count == count
    [event] = store.events.next_events(before)
    data = parse_event(event).body.data[0]
    assert data.complete and data.count == count and len(data.added) == count
    assert data.digest == summary.digest
    first = f"{(part.sd.location or '').rstrip('/')}/part-0000000-c000.snappy.parquet#crc32c-00000000-8#"
    assert data.added[0].startswith(first), data.added[0]  # the replica's own file, not the source's
    rebuilt = listing_digest.of(
        (f"part-{i:07d}-c000.snappy.parquet", f"crc32c-{i:08x}-8") for i in range(count)
    )
    assert summary.digest == rebuilt


def test_the_replicas_own_event_reads_back_past_the_inflate_limit_that_bounds_other_messages(
    store: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit (64 MB by default) is passed by a partition of some 400,000 files: lowered here to 1 MB."""
    monkeypatch.setenv("HMSREPL_MESSAGE_MAX_INFLATED_BYTES", str(1 << 20))
    count = 3 * PAGE  # about 3.5 MB of JSON
    before = store.events.current_event_id()
    add(store, listing(count))

    [event] = store.events.next_events(before)
    assert isinstance(event, LoggedEvent)
    assert len(parse_event(event).body.data[0].added) == count
    assert len(event.body()["data"][0]["added"]) == count
    assert isinstance(event._replace(event_id=event.event_id), LoggedEvent)

    received = NotificationEvent(*event)  # the same message as a peer receives it, over the notification API
    with pytest.raises(MessageLimitError, match="decompression bomb"):
        parse_event(received)
    with pytest.raises(MessageLimitError):
        received.body()


def test_a_listing_that_changes_between_its_walks_records_and_logs_nothing(store: Metastore) -> None:
    before = store.events.current_event_id()
    with pytest.raises(ListingChangedError, match="changed while the load read it"):
        add(store, listing(3 * PAGE, changed_at=2 * PAGE + 5))
    assert store.events.current_event_id() == before
    assert store.catalog.get_partitions_by_names("big", "t", ["p=a"]) == []


def test_a_new_listing_recorded_in_batches_looks_up_none_of_its_paths(store: Metastore) -> None:
    """A new object's listing names each file once (the dump's validation refuses a repeat), so no batch's
    paths are looked up in what the batches before it recorded: on PostgreSQL such look-ups in a listing the
    same transaction fills are planned without statistics, as scans of all of it."""
    bulk = bulk_rows.driver_statements_sent
    with statements_sent(store.engine) as sent:
        add(store, listing(5_000))  # one page, recorded in batches of 2,000
    inserts = sum(statement.startswith("INSERT INTO data_files") for statement in sent)
    assert inserts + bulk_rows.driver_statements_sent - bulk == 3  # the batches over COPY_MIN_ROWS go in bulk
    assert not listing_lookups(sent)
    assert recorded(store).count == 5_000


def test_a_path_repeated_in_a_later_page_fails_the_write_and_records_nothing(store: Metastore) -> None:
    """A new listing is recorded without looking its paths up (``new_paths``): the dump's validation refuses a
    listing that names a file twice, and a repeat that reached the record anyway fails on the listing's key,
    leaving no partition, no record and no event (not a listing counted twice)."""
    before = store.events.current_event_id()
    with pytest.raises(IntegrityError):
        add(store, listing(PAGE + 2_000, repeats={PAGE + 1_000: 5}))
    assert store.events.current_event_id() == before
    assert store.catalog.get_partitions_by_names("big", "t", ["p=a"]) == []
    with store.events.reader() as conn:
        assert conn.execute(select(func.count()).select_from(data_files)).scalar() == 0
