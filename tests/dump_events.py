"""The events of an incremental dump, read and edited the way a test needs: to check what a dump holds, to
tamper with it as an attacker would, or to write it as an older version did (layout format 1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hmsrepl.replication.layout import DUMP_METADATA, DumpDir, DumpLayout, encode_event

Document = dict[str, Any]


def _dump(dump: DumpDir | Path | str) -> DumpDir:
    return dump if isinstance(dump, DumpDir) else DumpDir(str(dump))


def read_events(dump: DumpDir | Path | str) -> list[Document]:
    """Every event's document in event id order, with its ``files`` (an empty list when it has none)."""
    dump = _dump(dump)
    layout_format = dump.read_metadata().format
    return [
        {**event.document, "files": event.files}
        for _, segment in dump.event_segments(layout_format)
        for event in dump.read_segment(segment, layout_format)
    ]


def rewrite_events(dump: DumpDir | Path | str, change: Callable[[Document], Document | None]) -> None:
    """Rewrite each event in place: ``change`` gets its document with ``files`` and returns the new one, or
    None to leave the event out of the dump."""
    dump = _dump(dump)
    for first, segment in dump.event_segments(2):
        kept = []
        for event in dump.read_segment(segment, 2):
            new = change({**event.document, "files": event.files})
            if new is not None:
                files = new.pop("files", [])
                kept.append(encode_event(new, files))
        if kept:
            dump.write_segment(first, kept)
        else:
            dump.remove_tree(DumpLayout.segment(first).rsplit("/", 1)[0])


def edit_event(
    dump: DumpDir | Path | str, event_type: str, change: Callable[[Document], Any], nth: int = 0
) -> Document:
    """Edit the ``nth`` event of ``event_type`` in place (``change`` mutates its document, ``files``
    included); returns the edited document."""
    seen: list[Document] = []

    def edit(doc: Document) -> Document:
        if doc["event_type"] == event_type:
            if len(seen) == nth:
                change(doc)
            seen.append(doc)
        return doc

    rewrite_events(dump, edit)
    assert len(seen) > nth, f"the dump has no {event_type} event number {nth}"
    return seen[nth]


def to_layout_format_1(dump: DumpDir | Path | str) -> None:
    """Rewrite a dump as layout format 1 wrote it: a directory per event with its ``_metadata`` and
    ``_files``."""
    dump = _dump(dump)
    events = read_events(dump)
    for _, segment in dump.event_segments(2):
        dump.remove_tree(segment.rsplit("/", 1)[0])
    for doc in events:
        files = doc.pop("files")
        dump.write_json(DumpLayout.event(doc["event_id"]), doc)
        if files:
            dump.write_files(DumpLayout.event_files(doc["event_id"]), files)
    dump.write_json(DUMP_METADATA, {**dump.read_json(DUMP_METADATA), "format": 1})
