"""The log's and the dumps' JSON codec reads back exactly what the standard library would, for any document.

The fast encoder disagrees with the standard library on NaN, integers beyond 64 bits, lone surrogates and
non-string keys; each of those must still round-trip (or read) as the standard library reads it, or a stored
event would change meaning between the source and the replica.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hmsrepl.formats.json_text import dumps_sorted, loads
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.events import decode_message, encode_message
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.statistics import ColumnStat
from tests.conftest import make_config
from tests.helpers import make_table


def json_documents(integers: st.SearchStrategy[int], *, floats: bool = True) -> st.SearchStrategy[object]:
    scalars = st.none() | st.booleans() | integers | st.text(max_size=20)
    if floats:
        scalars |= st.floats(allow_nan=False, allow_infinity=False)
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
        max_leaves=30,
    )


# Integers as wide as Thrift's i64 and orjson's u64 (wider ones: test_integers_beyond_64_bits_...).
INTEGERS = st.integers(min_value=-(2**63), max_value=2**64 - 1)
documents = json_documents(INTEGERS)
# Byte for byte as the standard library writes it (floats aside: 5e-08 and 5e-8 are the same number).
documents_exact = json_documents(INTEGERS, floats=False)


@given(documents)
def test_documents_read_back_as_the_standard_library_writes_them(doc: object) -> None:
    encoded = dumps_sorted(doc)
    assert loads(encoded) == doc
    assert loads(encoded.decode()) == doc
    assert loads(encoded) == json.loads(json.dumps(doc, sort_keys=True))


@given(st.dictionaries(st.text(max_size=10), documents_exact, max_size=8))
def test_keys_are_sorted_and_the_text_is_compact(doc: dict) -> None:
    standard = json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    assert dumps_sorted(doc) == standard


def test_values_the_fast_encoder_refuses_are_kept() -> None:
    doc = {"lone": "\ud800", "text": "x"}
    assert loads(dumps_sorted(doc)) == doc
    assert loads(dumps_sorted({7: "int key"})) == {"7": "int key"}


def test_integers_beyond_64_bits_are_written_exactly_and_read_as_the_nearest_float() -> None:
    """No event field is wider than Thrift's i64; a dump from elsewhere with a wider one reads it as a float,
    which the dump's validation refuses where an integer is wanted."""
    doc = {"big": 2**70, "neg": -(2**64) - 1}
    assert json.loads(dumps_sorted(doc)) == doc
    assert loads(dumps_sorted(doc)) == {"big": float(2**70), "neg": float(-(2**64) - 1)}


def test_nan_and_infinities_are_kept_when_the_document_may_hold_them() -> None:
    doc = {"low": float("nan"), "high": float("inf"), "min": float("-inf")}
    back = loads(dumps_sorted(doc, exact_floats=True))
    assert math.isnan(back["low"]) and back["high"] == math.inf and back["min"] == -math.inf
    # Documents written by the standard library before (NaN spelled out) still read.
    assert math.isnan(loads(b'{"x":NaN}')["x"])


@pytest.mark.parametrize("broken", [b"", b"{", b'{"a":}', b"\xff\xfe", b"[1,2"])
def test_broken_documents_raise_what_the_standard_library_raises(broken: bytes) -> None:
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)):
        loads(broken)


@pytest.mark.parametrize("compress", [False, True])
def test_logged_messages_round_trip_with_non_ascii_and_long_integers(compress: bool) -> None:
    body = {"name": "crème brûlée \U0001f600", "write_id": 2**63 - 1, "low": -(2**63), "n": [1.5, -0.0]}
    text, fmt = encode_message(body, compress=compress, compress_min_bytes=1)
    assert decode_message(text, fmt) == body


def test_a_column_statistics_event_keeps_nan_bounds(sqlite_metastore: Metastore) -> None:
    """Spark's ANALYZE of a double column holding NaN stores NaN bounds: the event says NaN, not null."""
    store = sqlite_metastore
    store.catalog.create_database(Database(name="s"))
    table = make_table("s", "t")
    store.catalog.create_table(table)
    column = table.sd.cols[0]
    before = store.get_current_notification_event_id()
    stat = ColumnStat(
        column.name, column.type, "doubleStats", {"lowValue": float("nan"), "highValue": 1.5, "numNulls": 0}
    )
    store.stats.update("s", "t", [stat])
    (event,) = store.events.next_events(before, 10)
    (logged,) = event.body()["stats"]
    assert math.isnan(logged["data"]["lowValue"]) and logged["data"]["highValue"] == 1.5


def test_a_dump_segment_line_keeps_nan_bounds() -> None:
    from hmsrepl.replication.layout import encode_event

    doc = {"event_type": "UPDATE_TABLE_COLUMN_STAT", "message": {"stats": [{"data": {"lowValue": math.nan}}]}}
    line = encode_event(doc, [])
    assert math.isnan(loads(line)["message"]["stats"][0]["data"]["lowValue"])


@pytest.mark.parametrize("compress", [False, True])
def test_non_ascii_snapshots_are_logged_and_read_back_on_every_backend(
    backend: str, db_url: str, tmp_path: Path, compress: bool
) -> None:
    """Messages are UTF-8 JSON now (they were ASCII with escapes): each backend's message column keeps them."""
    store = Metastore.open(make_config(db_url, tmp_path, compress_events=compress, compress_min_bytes=1))
    try:
        store.catalog.create_database(Database(name="u"))
        before = store.get_current_notification_event_id()
        table = make_table("u", "t").model_copy(
            update={"parameters": {"comment": "crème brûlée \U0001f600 日本"}}
        )
        store.catalog.create_table(table)
        (event,) = store.events.next_events(before, 10)
        assert event.body()["table"]["parameters"]["comment"] == "crème brûlée \U0001f600 日本"
    finally:
        store.close()
