"""An event naming a very long listing (a bootstrap's partition of 1,000,000 files) is logged in pieces.

What a user relies on: the stored message reads back as the same document whatever its size, and logging it
never holds the whole JSON text at once (160 MB for a million files, on top of the listing itself).
"""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import given

from hmsrepl.formats.json_text import dumps_sorted, dumps_sorted_pieces, loads
from hmsrepl.metastore.events import (
    GZIP_JSON_FORMAT,
    LONG_LISTING,
    decode_message,
    encode_message,
    names_many,
)
from hmsrepl.metastore.payloads import (
    AddPartitionBody,
    DataChange,
    InsertBody,
    PartitionSnapshot,
    TableSnapshot,
    encode,
    snapshot_of,
)
from tests.helpers import make_partition, make_table
from tests.unit.test_json_text import documents, documents_exact


def listing(count: int) -> list[str]:
    return [f"file:/w/t/p=a/part-{i:07d}.parquet#crc32c-{i:08x}-8##" for i in range(count)]


@given(documents_exact)
def test_pieces_are_the_bytes_of_the_whole_text(doc: object) -> None:
    assert b"".join(dumps_sorted_pieces(doc, piece_items=2)) == dumps_sorted(doc)


@given(documents)
def test_pieces_read_back_as_the_document(doc: object) -> None:
    assert loads(b"".join(dumps_sorted_pieces(doc, piece_items=1))) == loads(dumps_sorted(doc))


def test_a_value_only_the_standard_library_writes_is_kept_in_its_piece() -> None:
    doc = {"files": ["a", "\ud800", "b", "crème"], "n": 2**70}
    assert json.loads(b"".join(dumps_sorted_pieces(doc, piece_items=2))) == doc


def test_a_long_listing_is_logged_compressed_and_reads_back() -> None:
    doc = {"v": 2, "data": {"added": listing(LONG_LISTING), "removed": [], "complete": True}}
    text, fmt = encode_message(doc, compress=True, compress_min_bytes=1 << 30)
    assert fmt == GZIP_JSON_FORMAT  # compressed whatever the threshold: it is long by its listing
    assert decode_message(text, fmt) == doc


@pytest.mark.parametrize("per_partition", [False, True])
def test_logging_a_long_listing_never_holds_its_whole_text(per_partition: bool) -> None:
    """An INSERT's change, or one partition's among an ADD_PARTITION's (a bootstrap load's event)."""
    change = {"added": listing(200_000), "removed": [], "complete": True}
    doc = {"v": 2, "data": [None, change] if per_partition else change}
    whole = len(dumps_sorted(doc))
    tracemalloc.start()
    try:
        text, fmt = encode_message(doc, compress=True, compress_min_bytes=1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # What it holds is the compressed form it stores (about a seventh of the text, base64-encoded, as bytes
    # and as text), never the text itself.
    assert peak < 0.75 * whole, f"encoding held {peak:,} bytes for a text of {whole:,}"
    assert decode_message(text, fmt) == doc


def test_uncompressed_logs_keep_one_plain_text() -> None:
    doc = {"data": {"added": listing(LONG_LISTING)}}
    text, fmt = encode_message(doc, compress=False, compress_min_bytes=0)
    assert fmt == "json-1" and json.loads(text) == doc


def test_the_files_a_body_names_are_counted_in_its_changes_listings_and_recycled_lists() -> None:
    table = make_table("d", "t", partition_keys=("p",))
    snapshot = snapshot_of(table, TableSnapshot)
    part = snapshot_of(make_partition(table, "a"), PartitionSnapshot)
    many = tuple(listing(LONG_LISTING))
    split = DataChange(many[:10], tuple(str(i) for i in range(LONG_LISTING - 10)))
    added = AddPartitionBody(table=snapshot, partitions=[part, part], v=2, data=[None, split])
    assert names_many(added) and names_many(encode(added))
    assert names_many(InsertBody(table=snapshot, files=list(many)))
    assert names_many({"recycled": list(many)})
    assert not names_many(InsertBody(table=snapshot, files=list(many[:-1])))
    assert not names_many(
        AddPartitionBody(table=snapshot, partitions=[part] * LONG_LISTING, v=2, data=[None])
    )
