"""Reading the notification log backwards: the events behind a table's state as of an event, and drops.

A table's history is found from the state's end: events logged under its name, back to the CREATE_TABLE that
began it, following renames (an ALTER_TABLE that gave it its name is logged under the name it had before).
Meeting a drop or a rename away from the name first means the name held no table at that point.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from hmsrepl.metastore.event_specs import TXN_KINDS, Scope, kinds, parse_event
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.events import JSON_FORMAT, EventType, NotificationEvent
from hmsrepl.metastore.messages import AlterTableMessage
from hmsrepl.restore.errors import RestoreError

PAGE = 1_000
#: Events that change nothing a restored table holds (its write ids and statistics are not restored).
IGNORED = frozenset(TXN_KINDS | kinds(scope=Scope.STATS))


def backwards(log: EventLog, before: int, **filters: object) -> Iterator[NotificationEvent]:
    """Events older than ``before``, newest first, read a page at a time."""
    while True:
        page = log.previous_events(before, PAGE, **filters)  # type: ignore[arg-type]
        yield from page
        if len(page) < PAGE:
            return
        before = page[-1].event_id


def _names(event: NotificationEvent) -> tuple[tuple[str, str], tuple[str, str]] | None:
    """(before, after) names of a rename event, None for any other event."""
    if event.event_type != EventType.ALTER_TABLE:
        return None
    message = parse_event(event)
    if not isinstance(message, AlterTableMessage):
        return None
    before = (message.before.db_name, message.before.table_name)
    after = (message.table.db_name, message.table.table_name)
    return (before, after) if before != after else None


def _may_name(event: NotificationEvent, name: str) -> bool:
    """Whether an event's message may name table ``name`` (a plain JSON one is searched without parsing it;
    names are identifiers, which JSON never escapes): most ALTER_TABLE events are of other tables."""
    return event.message_format != JSON_FORMAT or f'"{name}"' in event.message


def table_history(log: EventLog, db: str, name: str, as_of: int) -> list[NotificationEvent]:
    """The events that made table ``db.name`` what it was as of event ``as_of``, oldest (its creation) first.

    Raises RestoreError when the name held no table then, or when the log no longer holds its creation.
    """
    wanted = f"{db}.{name}"
    collected: list[NotificationEvent] = []
    cursor = as_of + 1
    while True:
        own = backwards(log, cursor, db_name=db, table_name=name)
        alters = backwards(log, cursor, event_types=[EventType.ALTER_TABLE.value])
        renamed_in = (
            e for e in alters if _may_name(e, name) and (n := _names(e)) is not None and n[1] == (db, name)
        )
        moved = False
        for event in heapq.merge(own, renamed_in, key=lambda e: -e.event_id):
            kind = event.event_type
            if kind in IGNORED:
                continue
            names = _names(event)
            if names is not None and names[1] == (db, name):  # the table took this name here
                collected.append(event)
                (db, name), cursor, moved = names[0], event.event_id, True
                break
            if kind == EventType.CREATE_TABLE:
                collected.append(event)
                return collected[::-1]
            if kind == EventType.DROP_TABLE or names is not None:
                raise RestoreError(
                    f"table '{wanted}' did not exist as of event {as_of} (the name was "
                    f"{'dropped' if kind == EventType.DROP_TABLE else 'renamed away'} at event {event.event_id}); "
                    "pick a later event or timestamp"
                )
            collected.append(event)
        if not moved:
            raise _no_creation(log, wanted, as_of)


def _no_creation(log: EventLog, wanted: str, as_of: int) -> RestoreError:
    oldest = log.oldest_event_id()
    if oldest is not None and oldest > 1:
        return RestoreError(
            f"cannot rebuild table '{wanted}' as of event {as_of}: the log no longer holds its creation "
            f"(events before {oldest} were cleaned up after HMSREPL_EVENT_TTL_SECONDS); restore it from a "
            "backup or a replica"
        )
    return RestoreError(
        f"table '{wanted}' did not exist as of event {as_of}; check the name and the event id"
    )


def last_event(
    log: EventLog, kind: EventType, db: str, table: str | None = None, *, before: int | None = None
) -> NotificationEvent | None:
    """The newest event of ``kind`` for ``db`` (and ``table``), older than ``before`` when given."""
    cursor = (log.current_event_id() + 1) if before is None else before
    found = log.previous_events(cursor, 1, db_name=db, table_name=table, event_types=[kind.value])
    return found[0] if found else None


def drop_run(log: EventLog, db: str, drop_id: int) -> list[NotificationEvent]:
    """The table and function drops of ``db`` logged right before its DROP_DATABASE at ``drop_id``.

    A cascade drops each table and function, one event each, before the database's own event; the run of
    such drops with no other change of the database between them is what the database held.
    """
    run: list[NotificationEvent] = []
    for event in backwards(log, drop_id, db_name=db):
        if event.event_type in IGNORED:
            continue
        if event.event_type not in (EventType.DROP_TABLE, EventType.DROP_FUNCTION):
            break
        run.append(event)
    return run[::-1]


def event_at(log: EventLog, timestamp: int) -> int:
    """The event id a timestamp (seconds since the epoch) stands for: the last event logged by then."""
    found = log.last_event_at(timestamp)
    if found == 0:
        raise RestoreError(f"no event was logged at or before timestamp {timestamp}; pick a later time")
    return found
