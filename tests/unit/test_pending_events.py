"""Validation hands the load the event documents it checked (``dump_validation.PendingEvents``), and the
dump's event segments hold every event once, in order (``layout.SegmentWriter``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.dump_validation import DumpValidator, PendingEvents
from hmsrepl.replication.layout import (
    SEGMENT_EVENTS,
    DumpDir,
    DumpLayout,
    DumpMetadata,
    SegmentWriter,
    encode_event,
)
from hmsrepl.replication.source_roots import SourceRoots


def event(event_id: int, db: str = "db") -> dict[str, Any]:
    body = {"database": {"name": db, "parameters": {}}}
    return {"event_id": event_id, "event_time": 0, "event_type": "DROP_DATABASE", "db": db, "message": body}


def write_events(dump: DumpDir, documents: list[dict[str, Any]]) -> None:
    segments = SegmentWriter(dump.write_segment)
    for document in documents:
        segments.add(document["event_id"], document, [])
    segments.flush()


def validate(dump: DumpDir, count: int, last_applied: int = 0) -> PendingEvents:
    meta = DumpMetadata("incremental", "db", "db", 0, count, count, event_count=count)
    roots = SourceRoots(f"{dump.uri}/wh", f"{dump.uri}/cm")
    validator = DumpValidator(dump, meta, roots, lambda _: None, {"DROP_DATABASE"})
    return validator.validate_incremental(last_applied, "").pending_events


def test_the_load_gets_the_documents_validation_checked_not_what_the_directory_holds_later(
    tmp_path: Path,
) -> None:
    dump = DumpDir(str(tmp_path / "dump"))
    write_events(dump, [event(i) for i in range(1, 4)])
    pending = validate(dump, 3, last_applied=1)
    assert pending.ids == [2, 3]
    write_events(dump, [event(1), event(2, db="changed after the check"), event(3)])
    assert pending.document(dump, 2)["db"] == "db"
    assert pending.take(dump, 2)["db"] == "db"
    assert 2 not in pending.documents  # taken once: no longer held


def test_documents_past_the_budget_are_read_again_from_their_segment(tmp_path: Path) -> None:
    dump = DumpDir(str(tmp_path / "dump"))
    size = len(encode_event(event(1), []))
    pending = PendingEvents(ids=[1, 2], budget=size)
    segment = DumpLayout.segment(1)
    pending.keep(1, event(1, db="kept"), size, segment)
    pending.keep(2, event(2, db="kept"), size, segment)  # over the budget: not kept
    assert pending.documents.keys() == {1}
    write_events(dump, [event(1, db="read"), event(2, db="read")])
    assert [pending.take(dump, i)["db"] for i in pending.ids] == ["kept", "read"]


def event_v2(event_id: int, db: str = "db") -> dict[str, Any]:
    """An event of the current message format, whose data changes validation parses into its message."""
    document = event(event_id, db)
    document["message"]["v"] = 2
    return document


def test_the_apply_gets_the_message_validation_parsed_from_the_kept_document(tmp_path: Path) -> None:
    dump = DumpDir(str(tmp_path / "dump"))
    write_events(dump, [event_v2(i) for i in range(1, 4)])
    pending = validate(dump, 3, last_applied=1)
    assert pending.messages.keys() == {2, 3}  # parsed once, by validation
    parsed = pending.messages[3]
    write_events(dump, [event_v2(1), event_v2(2, db="changed after the check"), event_v2(3)])
    document, message = pending.take_parsed(dump, 2)
    assert (document["db"], message.db_name, message.database.name) == ("db", "db", "db")
    assert pending.message(dump, 3) is parsed and pending.take_parsed(dump, 3)[1] is parsed
    assert not pending.messages and not pending.documents  # taken once: no longer held


def test_a_document_read_again_is_parsed_again_not_given_the_message_offered_with_it(tmp_path: Path) -> None:
    dump = DumpDir(str(tmp_path / "dump"))
    write_events(dump, [event_v2(1, db="kept"), event_v2(2, db="kept")])
    checked = validate(dump, 2).messages
    size = len(encode_event(event_v2(1), []))
    pending = PendingEvents(ids=[1, 2], budget=size)
    segment = DumpLayout.segment(1)
    pending.keep(1, event_v2(1, db="kept"), size, segment, checked[1])
    pending.keep(2, event_v2(2, db="kept"), size, segment, checked[2])  # over the budget: not kept
    assert pending.messages.keys() == {1}  # a message is kept only with its document
    write_events(dump, [event_v2(1, db="read"), event_v2(2, db="read")])
    taken = [pending.take_parsed(dump, i) for i in pending.ids]
    assert [(document["db"], message.db_name) for document, message in taken] == [
        ("kept", "kept"),
        ("read", "read"),
    ]


def test_events_are_written_a_thousand_a_segment_and_read_back_in_order(tmp_path: Path) -> None:
    dump = DumpDir(str(tmp_path / "dump"))
    count = 2 * SEGMENT_EVENTS + 5
    write_events(dump, [event(i) for i in range(10, 10 + count)])
    segments = dump.event_segments(2)
    assert [first for first, _ in segments] == [10, 10 + SEGMENT_EVENTS, 10 + 2 * SEGMENT_EVENTS]
    pending = validate(dump, 10 + count)
    assert pending.ids == list(range(10, 10 + count))


def test_events_out_of_order_or_repeated_are_refused(tmp_path: Path) -> None:
    dump = DumpDir(str(tmp_path / "dump"))
    dump.write_segment(1, [encode_event(event(i), []) for i in (1, 3, 2)])
    with pytest.raises(DumpValidationError, match=r"events/1/_events line 3: holds event 2 out of order"):
        validate(dump, 3)
    dump.write_segment(1, [encode_event(event(1), [])])
    dump.write_segment(5, [encode_event(event(1), [])])  # the same event again in a later segment
    with pytest.raises(DumpValidationError, match="out of order"):
        validate(dump, 3)
