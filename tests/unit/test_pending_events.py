"""Validation hands the load the event documents it checked (``dump_validation.PendingEvents``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hmsrepl.replication.dump_validation import DumpValidator, PendingEvents, SourceRoots
from hmsrepl.replication.layout import DumpDir, DumpLayout, DumpMetadata


def event(event_id: int, db: str = "db") -> dict[str, Any]:
    body = {"database": {"name": db, "parameters": {}}}
    return {"event_id": event_id, "event_time": 0, "event_type": "DROP_DATABASE", "db": db, "message": body}


def validated(tmp_path: Path, count: int, last_applied: int = 0) -> tuple[DumpDir, PendingEvents]:
    dump = DumpDir(str(tmp_path / "dump"))
    for event_id in range(1, count + 1):
        dump.write_json(DumpLayout.event(event_id), event(event_id))
    meta = DumpMetadata("incremental", "db", "db", 0, count, count, event_count=count)
    roots = SourceRoots(f"{tmp_path}/wh", f"{tmp_path}/cm")
    validator = DumpValidator(dump, meta, roots, lambda _: None, {"DROP_DATABASE"})
    return dump, validator.validate_incremental(last_applied, "").pending_events


def test_the_load_gets_the_documents_validation_checked_not_what_the_directory_holds_later(
    tmp_path: Path,
) -> None:
    dump, pending = validated(tmp_path, 3, last_applied=1)
    assert pending.ids == [2, 3]
    dump.write_json(DumpLayout.event(2), event(2, db="changed after the check"))
    assert pending.document(dump, 2)["db"] == "db"
    assert pending.take(dump, 2)["db"] == "db"
    assert 2 not in pending.documents  # taken once: no longer held


def test_documents_past_the_budget_are_read_again(tmp_path: Path) -> None:
    dump = DumpDir(str(tmp_path / "dump"))
    dump.write_json(DumpLayout.event(1), event(1))
    size = dump.read_json_sized(DumpLayout.event(1))[1]
    pending = PendingEvents(ids=[1, 2], budget=size)
    pending.keep(1, event(1, db="kept"), size)
    pending.keep(2, event(2, db="kept"), size)  # over the budget: not kept
    assert pending.documents.keys() == {1}
    dump.write_json(DumpLayout.event(2), event(2, db="read"))
    assert [pending.take(dump, i)["db"] for i in pending.ids] == ["kept", "read"]
