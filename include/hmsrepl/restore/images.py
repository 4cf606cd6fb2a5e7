"""A table as it was as of an event: its metadata and each object's exact listing, replayed from its history.

Every data change of the log is applied in order (``DataChange.apply``) and checked against the file count
and digest the source recorded with it (``DataChange.check``), so an image is exactly what readers saw then,
never a guess: a missing or doubled event fails the replay instead of restoring the wrong files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import NotificationEvent
from hmsrepl.metastore.messages import (
    AddPartitionMessage,
    AlterPartitionMessage,
    AlterTableMessage,
    CreateTableMessage,
    DataChange,
    DropPartitionMessage,
    InsertMessage,
    ObjectData,
    partition_key_names,
)
from hmsrepl.restore.errors import RestoreError


@dataclass
class ObjectImage:
    """One table's or partition's metadata and listing (relative path -> encoded URI) as of the image."""

    snapshot: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)

    @property
    def location(self) -> str | None:
        return (self.snapshot.get("sd") or {}).get("location")


@dataclass
class TableImage:
    """A table as of event ``as_of``; ``files`` is its own listing (unpartitioned tables only)."""

    table: dict[str, Any]
    as_of: int
    files: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, ObjectImage] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.table['db_name']}.{self.table['table_name']}"

    @property
    def location(self) -> str | None:
        return (self.table.get("sd") or {}).get("location")

    def partition_name(self, values: Iterable[str]) -> str:
        return make_partition_name(partition_key_names(self.table), list(values))


def replay(events: Iterable[NotificationEvent], as_of: int) -> TableImage:
    """The image the events (a ``history.table_history``, creation first) leave the table in."""
    image: TableImage | None = None
    for event in events:
        message = parse_event(event)
        if isinstance(message, CreateTableMessage):
            image = TableImage(message.table.to_json(), as_of)
            for obj in message.objects():
                _apply(image, _TableObject(image), obj.change, event)
        elif image is None:
            raise RestoreError(
                f"history of table '{event.db_name}.{event.table_name}' does not start at its creation"
            )
        elif isinstance(message, AlterTableMessage):
            _alter_table(image, message, event)
        elif isinstance(message, AddPartitionMessage):
            for snapshot, change in zip(message.partitions, message.changes(), strict=True):
                name = image.partition_name(snapshot.values)
                image.partitions[name] = ObjectImage(snapshot.to_json())
                if change is not None:
                    _apply(image, image.partitions[name], change, event)
        elif isinstance(message, DropPartitionMessage):
            for snapshot in message.partitions:
                image.partitions.pop(image.partition_name(snapshot.values), None)
        elif isinstance(message, AlterPartitionMessage):
            _alter_partition(image, message, event)
        elif isinstance(message, InsertMessage):
            for obj in message.objects():
                _apply(image, _object_of(image, obj, event), obj.change, event)
    if image is None:
        raise RestoreError("no creation event in the table's history")
    return image


def _object_of(image: TableImage, obj: ObjectData, event: NotificationEvent) -> ObjectImage:
    if obj.partition_name is None:
        return _TableObject(image)
    found = image.partitions.get(obj.partition_name)
    if found is None:
        raise RestoreError(
            f"event {event.event_id} writes partition '{obj.partition_name}' of '{image.name}', which its "
            "history never added; the log is incomplete"
        )
    return found


class _TableObject(ObjectImage):
    """The table's own listing seen as an object (unpartitioned tables keep their files on the image)."""

    def __init__(self, image: TableImage) -> None:
        super().__init__(image.table, image.files)


def _apply(image: TableImage, obj: ObjectImage, change: DataChange, event: NotificationEvent) -> None:
    after = change.apply(obj.files)
    change.check(after, f"{image.name} at event {event.event_id}")
    obj.files.clear()
    obj.files.update(after)


def _alter_table(image: TableImage, message: AlterTableMessage, event: NotificationEvent) -> None:
    old_location, new, new_location = image.location, message.table.to_json(), message.table.location
    if old_location and new_location and old_location != new_location:
        for part in image.partitions.values():  # a rename moves the partitions below the table with it
            part.snapshot = _rerooted(part.snapshot, old_location, new_location)
    image.table = new
    change = message.data
    if change is not None:
        _apply(image, _TableObject(image), change, event)


def _alter_partition(image: TableImage, message: AlterPartitionMessage, event: NotificationEvent) -> None:
    before = message.before
    after = message.after.to_json()
    name = image.partition_name(message.after.values)
    old_name = image.partition_name(before.values) if before is not None else name
    part = image.partitions.pop(old_name, None) or ObjectImage(after)
    part.snapshot = after
    image.partitions[name] = part
    if message.data is not None:
        _apply(image, part, message.data, event)


def _rerooted(snapshot: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    out = dict(snapshot)
    sd = dict(out.get("sd") or {})
    location = sd.get("location") or ""
    if location.startswith(old.rstrip("/") + "/"):
        sd["location"] = new.rstrip("/") + location[len(old.rstrip("/")) :]
    out["sd"] = sd
    return out
