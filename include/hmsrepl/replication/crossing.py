"""Tables renamed across databases, as one policy's dump sees them.

``ALTER TABLE a.t RENAME TO b.u`` is logged once, under the database the table leaves (``a``), as Hive logs
it. A dump of ``b`` reads its own database's events by the log's database column, so it would never see the
table arrive; a dump of ``a`` would see a rename whose new name belongs to another database. Both are a
change of the policy's scope rather than a rename the replica can replay (the replica's target database is
the only one a load writes): the table arriving is bootstrapped inside the incremental dump like a table
renamed in from outside the policy's table filter, the table leaving is dropped like a table renamed out of
it (``replace.WindowPlanner``).
"""

from __future__ import annotations

from typing import Any

from hmsrepl.metastore.events import JSON_FORMAT, EventType, NotificationEvent
from hmsrepl.metastore.messages import Message
from hmsrepl.replication.policy import ReplicationPolicy

# The kind of event a rename across databases is logged as: a dump of the database it enters reads these
# from every other database of its window (``SourceEvents.next_renames_into``).
MOVE_KINDS = (str(EventType.ALTER_TABLE),)


def may_enter(row: NotificationEvent, db_name: str) -> bool:
    """Cheap test before parsing another database's ALTER_TABLE: could it move a table into ``db_name``?

    A message stored as plain JSON names the database it moves the table into as a string; one that does
    not hold the name cannot. Compressed messages are parsed (``enters`` decides)."""
    if row.event_type not in MOVE_KINDS or (row.db_name or "") == db_name:
        return False
    return row.message_format != JSON_FORMAT or f'"{db_name}"' in row.message


def enters(message: Message[Any], db_name: str) -> bool:
    """The event renames a table of another database into ``db_name``."""
    return message.moved_to_db == db_name


def leaves(message: Message[Any], db_name: str) -> bool:
    """The event (logged under ``db_name``) renames one of its tables into another database."""
    moved = message.moved_to_db
    return moved is not None and moved != db_name


def crossing_relevant(message: Message[Any], logged_db: str, policy: ReplicationPolicy) -> bool | None:
    """Whether a rename across databases belongs to ``policy`` (None: the event is no such rename).

    One arriving belongs to it when its new name is included, one leaving when its old name was: the other
    name belongs to another database, whatever the table filter says of it."""
    if message.moved_to_db is None:
        return None
    if policy.functions_only:
        return False
    if enters(message, policy.db_name):
        table = message.table
        return table is not None and policy.includes_table(table.table_name)
    before = getattr(message, "before", None)
    return logged_db == policy.db_name and before is not None and policy.includes_table(before.table_name)


def qualified_target(message: Message[Any]) -> str | None:
    """``db.table`` a rename across databases moved the table to (None: not such a rename)."""
    table = message.table
    if message.moved_to_db is None or table is None:
        return None
    return f"{message.moved_to_db}.{table.table_name}"
