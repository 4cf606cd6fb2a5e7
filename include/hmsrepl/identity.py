"""Do two descriptions of a metastore name the same one? The Thrift server an Airflow connection reaches and
the database URL a Spark application opens are defined apart, and nothing else ties them together.

The metastore has no id of its own, but its notification log is one: event ids only grow and every event
records its time, type, database and table. The orchestrator reads the newest event over Thrift just before
it starts an application (``MetastoreIdentity``); the application then reads that event id from its database.
The same metastore has it with the same fields (the newest event is never cleaned up within seconds); another
metastore either lacks the id or holds a different event under it. An empty log (event 0) cannot be told
apart from another empty log, so it is accepted. Plain data and one query: no Airflow, no Spark.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hmsrepl.metastore import Metastore
    from hmsrepl.metastore.events import NotificationEvent

#: The fields of an event that must agree (its id is the key).
EVENT_FIELDS = ("event_time", "event_type", "db_name", "table_name")


class IdentityFormatError(ValueError):
    """The identity handed to an application is not the JSON ``MetastoreIdentity.to_json`` writes."""


@dataclass(frozen=True)
class MetastoreIdentity:
    """What an orchestrator saw of a metastore: where (connection and address) and its newest event."""

    connection: str
    address: str
    event_id: int
    event: dict[str, Any] | None = None

    @classmethod
    def of(cls, connection: str, address: str, newest: NotificationEvent | None) -> MetastoreIdentity:
        if newest is None:
            return cls(connection, address, 0)
        return cls(connection, address, newest.event_id, event_fields(newest))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> MetastoreIdentity:
        try:
            data = json.loads(text)
            return cls(
                str(data["connection"]), str(data["address"]), int(data["event_id"]), data.get("event")
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise IdentityFormatError(f"not a metastore identity ({exc})") from exc

    def describe(self) -> str:
        """``connection 'x' (thrift://h:p)``, for messages."""
        return f"Airflow connection '{self.connection}' ({self.address})"


def event_fields(event: NotificationEvent) -> dict[str, Any]:
    return {k: getattr(event, k) for k in EVENT_FIELDS}


def identity_mismatch(expected: MetastoreIdentity, store: Metastore) -> str | None:
    """Why ``store`` is not the metastore ``expected`` describes, or None when it is (or cannot be told)."""
    if expected.event_id <= 0 or not expected.event:
        return None
    found = store.get_next_notification(expected.event_id - 1, 1)
    if not found or found[0].event_id != expected.event_id:
        newest = store.get_current_notification_event_id()
        return f"its log has no event {expected.event_id} (newest {newest})"
    actual = event_fields(found[0])
    if actual != {k: expected.event.get(k) for k in EVENT_FIELDS}:
        return f"its event {expected.event_id} is {_show(actual)}, not {_show(expected.event)}"
    return None


def _show(fields: dict[str, Any]) -> str:
    where = ".".join(str(fields[k]) for k in ("db_name", "table_name") if fields.get(k))
    return f"{fields.get('event_type')} {where or '-'} at {fields.get('event_time')}"
