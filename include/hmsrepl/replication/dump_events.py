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
