"""One logged event as a dump handles it: the row and its typed message, parsed once.

A dump reads each event of its window several times (filtering, ACID preparation, planning, consolidation,
writing); before, every step decoded the stored text again and read the body by key. ``DumpEvent`` carries
the parsed message along, and ``rewritten`` is the one way a dump changes what an event says (a COMMIT_TXN
trimmed to the policy's tables, partitions taken out by compaction, a rename out of the policy as a drop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from hmsrepl.metastore.event_specs import EventSpec, parse_event, spec_of
from hmsrepl.metastore.events import JSON_FORMAT, EventType, NotificationEvent, encode_message
from hmsrepl.metastore.messages import Message
from hmsrepl.metastore.payloads import Payload

M = TypeVar("M", bound=Message[Any])


@dataclass(frozen=True)
class DumpEvent(Generic[M]):
    """An event and its message; ``DumpEvent[AlterTableMessage]`` is what a table's entry for ALTER_TABLE
    receives (the spec's message class, so no entry downcasts)."""

    event: NotificationEvent
    message: M

    @classmethod
    def of(cls, event: NotificationEvent) -> DumpEvent[Any]:
        return DumpEvent(event, parse_event(event))

    @property
    def event_id(self) -> int:
        return self.event.event_id

    @property
    def kind(self) -> EventType:
        return EventType(self.event.event_type)

    @property
    def spec(self) -> EventSpec:
        return spec_of(self.event.event_type)

    def rewritten(self, body: Payload, kind: EventType | None = None) -> DumpEvent[Any]:
        """The same event saying ``body`` (and, for a rename out of the policy, being a ``kind``)."""
        kind = kind or self.kind
        text, message_format = encode_message(
            body, compress=False, compress_min_bytes=0, exact_floats=spec_of(kind).floats
        )
        assert message_format == JSON_FORMAT
        event = self.event._replace(event_type=str(kind), message=text, message_format=message_format)
        # Made from the body itself: decoding the text just written would give the same message.
        message = spec_of(kind).message(str(kind), body, event.db_name, event.table_name)
        return DumpEvent(event, message)

    def without_data(self) -> DumpEvent[Any]:
        """The same event without its data change (the load applies its metadata only)."""
        return self.rewritten(self.message.body.without_data())


class ParsedEvents:
    """Events the planning pass of a dump parsed, handed to the writing pass so it parses them no second time.

    Both passes read the same rows of the log; parsing one (inflating and decoding its message) is most of
    a dump's work per event. At most ``room`` events are kept (the start of a long window; the rest are
    parsed again), and one is handed over only for a row equal to the one it was parsed from, id, type and
    message text included: a row that differs is parsed afresh, never answered from this memory.
    """

    def __init__(self, room: int) -> None:
        self._kept: dict[int, DumpEvent[Any]] = {}
        self._room = room

    def parse(self, row: NotificationEvent, *, keep: bool) -> DumpEvent[Any]:
        """The parsed event of ``row``: the kept one (given up: each is handed over once), else parsed now
        and, with ``keep`` and room left, kept for the next pass."""
        kept = self._kept.pop(row.event_id, None)
        if kept is not None and kept.event == row:
            return kept
        event = DumpEvent.of(row)
        if keep and len(self._kept) < self._room:
            self._kept[row.event_id] = event
        return event
