"""The checks of an incremental dump's events: each message's fields, snapshots, file lists and writes.

An event's message is as untrusted as the rest of a dump. Each event type must carry what its handler reads
(``EVENT_FIELDS``, and by message format the fields holding its data, ``DATA_FIELDS``), so a malformed one is
refused before the load's first change, not found missing half-way; every snapshot and file entry it holds
goes through the same object checks as a bootstrap's (``dump_snapshot_checks``), and a managed table's
partitions in one event must not take each other's directories (``DumpOwnership``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from hmsrepl.formats.partition_names import parse_partition_name
from hmsrepl.formats.paths import InvalidPathError, check_relative_path, show
from hmsrepl.metastore.event_specs import parse
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import MESSAGE_FORMAT_VERSION, Message
from hmsrepl.metastore.model import Function
from hmsrepl.replication.dump_checks import DumpValidationError, check_partition_values
from hmsrepl.replication.dump_ownership import DumpOwnership
from hmsrepl.replication.dump_snapshot_checks import SnapshotChecks
from hmsrepl.replication.layout import DumpedEvent

Fields = dict[str, type | tuple[type, ...]]
E = EventType
#: What each event type's message must hold for its handler (checked before the load, not found missing half-way).
EVENT_FIELDS: dict[EventType, Fields] = {
    E.CREATE_DATABASE: {},
    E.ALTER_DATABASE: {"after": dict},
    E.DROP_DATABASE: {},
    E.CREATE_TABLE: {"table": dict},
    E.ALTER_TABLE: {"before": dict, "after": dict},
    E.DROP_TABLE: {"table": dict},
    E.ADD_PARTITION: {"table": dict, "partitions": list},
    E.ALTER_PARTITION: {"table": dict, "after": dict},
    E.DROP_PARTITION: {"table": dict, "partitions": list},
    E.INSERT: {"table": dict},
    E.CREATE_FUNCTION: {"function": dict},
    E.DROP_FUNCTION: {"function": dict},
    E.OPEN_TXN: {"txn_ids": list},
    E.COMMIT_TXN: {"txn_id": int},
    E.ABORT_TXN: {"txn_id": int},
    E.ALLOC_WRITE_ID: {"table": str, "txn_to_write_ids": list},
    E.ACID_WRITE: {"txn_id": int},
    E.UPDATE_TABLE_COLUMN_STAT: {},
    E.UPDATE_PARTITION_COLUMN_STAT: {},
    E.DELETE_TABLE_COLUMN_STAT: {},
    E.DELETE_PARTITION_COLUMN_STAT: {},
}
#: Where each message format keeps the data of the events that always carry some (``messages``): format 1
#: full listings (one per partition for ADD_PARTITION), format 2 one data change (one per partition).
DATA_FIELDS: dict[int, dict[EventType, Fields]] = {
    1: {E.ADD_PARTITION: {"files": list}, E.INSERT: {"files": list}},
    MESSAGE_FORMAT_VERSION: {E.ADD_PARTITION: {"data": list}, E.INSERT: {"data": dict}},
}


def event_message(event: dict[str, Any]) -> Message[Any]:
    """The typed message of a dumped event's document."""
    return parse(event["event_type"], event["message"], event.get("db"), event.get("table"))


class EventChecks:
    """The checks of one event of an incremental dump (``event``), counted in the validation's report.

    ``known_event_types``: the event types the load can apply (others are refused here, not half-way)."""

    def __init__(self, checks: SnapshotChecks, known_event_types: Collection[str]) -> None:
        self.checks = checks
        self.known_event_types = known_event_types

    def fail(self, where: str, what: str) -> DumpValidationError:
        return self.checks.fail(where, what)

    def event(self, event: DumpedEvent) -> Message[Any] | None:
        """Check one event; its typed message when the checks parsed one (format 2 and later)."""
        where, doc = event.where, event.document
        kind = doc.get("event_type")
        if kind not in self.known_event_types:
            raise self.fail(where, f"event type {show(kind)} is not one a load can apply")
        body = doc.get("message")
        if not isinstance(body, dict):
            raise self.fail(where, "holds no event message")
        where = f"{where} ({kind})"
        version = body.get("v", 1)
        if version not in DATA_FIELDS:
            raise self.fail(where, f"message format {show(version)} is not one this load reads")
        fields = {**EVENT_FIELDS.get(kind, {}), **DATA_FIELDS[version].get(kind, {})}
        for key, wanted in fields.items():
            if not isinstance(body.get(key), wanted) or isinstance(body.get(key), bool):
                raise self.fail(where, f"message has no valid '{key}'")
        per_partition = "data" if version >= 2 else "files"
        if kind == E.ADD_PARTITION and len(body[per_partition]) != len(body["partitions"]):
            raise self.fail(where, "has a different number of file lists and partitions")
        for key in ("table", "db"):
            if doc.get(key) is not None:
                self.checks.name("table" if key == "table" else "database", doc[key], where)
        self.checks.report.events += 1
        self._message(body, where)
        message = self._changes(doc, where) if version >= 2 else None
        if not isinstance(event.files, list):
            raise self.fail(where, "files is not a list")
        for encoded in event.files:
            self.checks.entry(encoded, None, f"{where} files")
        return message

    def _changes(self, event: dict[str, Any], where: str) -> Message[Any]:
        """A format-2 message's data changes: files added below their own object, removed paths below it.
        Returns the message, parsed as the apply parses it (``event_message``)."""
        body = event["message"]
        docs = body.get("data")
        for doc in docs if isinstance(docs, list) else [docs]:
            if doc is None:
                continue
            ok = isinstance(doc, dict) and all(isinstance(doc.get(k, []), list) for k in ("added", "removed"))
            ok = ok and isinstance(doc.get("count") or 0, int) and isinstance(doc.get("digest") or "", str)
            if not ok:
                raise self.fail(where, "data change is malformed (added, removed, count or digest)")
        try:
            message = event_message(event)
            objects = message.objects()
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self.fail(where, f"data change does not match the message's objects: {exc}") from None
        for obj in objects:
            if obj.change.added:  # the location only matters to files (a metadata-only change has none)
                self.checks.object_files(
                    list(obj.change.added), self.checks.canonical_location_of(obj.snapshot.to_json()), where
                )
            for removed in obj.change.removed:
                try:
                    check_relative_path(removed, "removed file")
                except InvalidPathError as exc:
                    raise self.fail(where, str(exc)) from None
                if not removed:
                    raise self.fail(where, "a removed file has an empty path")
        return message

    def _message(self, body: dict[str, Any], where: str) -> None:
        """Every snapshot and file list an event message holds, whatever its type."""
        table_location: str | None = None
        keys: list[str] = []
        table_managed = False
        table = body.get("table")
        if isinstance(table, dict):
            table_location, keys, table_managed = self.checks.table(table, where)
        elif table is not None:  # ALLOC_WRITE_ID names its table
            self.checks.name("table", table, where)
        for side in ("before", "after"):
            snapshot = body.get(side)
            if not isinstance(snapshot, dict):
                continue
            if "values" in snapshot:
                self.checks.partition(snapshot, keys, table_location, f"{where} {side}")
            elif "location_uri" in snapshot or "name" in snapshot:
                self.checks.database(snapshot, f"{where} {side}", own=False)
            else:
                location, keys_after, _ = self.checks.table(snapshot, f"{where} {side}")
                if side == "after":
                    table_location, keys = location, keys_after
        partitions = body.get("partitions")
        part_locations: list[str | None] = []
        if partitions is not None:
            if not isinstance(partitions, list):
                raise self.fail(where, "partitions is not a list")
            part_locations = [self.checks.partition(p, keys, table_location, where) for p in partitions]
            if isinstance(table, dict) and table_managed:
                self._check_ownership(str(table.get("table_name")), table_location, keys, partitions, where)
        single = body.get("partition")
        single_location = None
        if isinstance(single, dict):
            single_location = self.checks.partition(single, keys, table_location, where)
        if isinstance(body.get("function"), dict):
            self.checks.name("function", body["function"].get("function_name"), where)
            if kind_creates_function(body):
                self.checks.model(Function, body["function"], where)
        writes = body.get("writes")
        if writes is not None:
            self._writes(writes, where)
        files = body.get("files")
        if files is None or writes is not None:  # a commit's flat list repeats its writes' files
            for encoded in files or []:
                self.checks.entry(encoded, None, where)
            return
        if not isinstance(files, list):
            raise self.fail(where, "files is not a list")
        if files and (
            files[0] is None or isinstance(files[0], list)
        ):  # ADD_PARTITION: one list per partition
            if len(files) != len(part_locations):
                raise self.fail(where, "has a different number of file lists and partitions")
            for group, location in zip(files, part_locations, strict=True):
                self.checks.object_files(group or [], location, where)
            return
        self.checks.object_files(files, self._object_location(body, single_location, table_location), where)

    def _check_ownership(
        self, table: str, location: str | None, keys: list[str], partitions: list[Any], where: str
    ) -> None:
        """One event's partitions of a managed table: each below its table or elsewhere, never a sibling's."""
        owners = DumpOwnership()
        owners.table(table, location)
        for part in partitions:
            owners.partition(
                table, dumped_partition_name(keys, part), self.checks.canonical_location_of(part)
            )
        conflict = owners.conflict()
        if conflict:
            raise self.fail(where, conflict)

    def _object_location(
        self, body: dict[str, Any], single_location: str | None, table_location: str | None
    ) -> str | None:
        """The location of the one object whose data a (non ADD_PARTITION) event changes."""
        after = body.get("after")
        if isinstance(after, dict) and "values" in after:  # ALTER_PARTITION
            return self.checks.canonical_location_of(after)
        if single_location is not None:  # INSERT into a partition
            return single_location
        if isinstance(after, dict):  # ALTER_TABLE
            return self.checks.canonical_location_of(after)
        return table_location

    def _writes(self, writes: Any, where: str) -> None:
        if not isinstance(writes, list):
            raise self.fail(where, "writes is not a list")
        for write in writes:
            if not isinstance(write, dict):
                raise self.fail(where, "a write is not an object")
            self.checks.name("table", write.get("table"), where)
            if not isinstance(write.get("write_id"), int):
                raise self.fail(where, f"write of {show(write.get('table'))} has no integer write id")
            if write.get("partition"):
                try:
                    pairs = parse_partition_name(write["partition"])
                    check_partition_values([k for k, _ in pairs], [v for _, v in pairs])
                except (ValueError, TypeError, AttributeError) as exc:
                    raise self.fail(where, f"write partition {show(write['partition'])}: {exc}") from None
            files = write.get("files")
            if not isinstance(files, list):
                raise self.fail(where, f"write of {show(write.get('table'))} has no file list")
            for encoded in files:
                self.checks.entry(encoded, None, where, require_subdir=True)


def dumped_partition_name(keys: list[str], part: dict[str, Any]) -> str:
    """The name of a dumped partition snapshot (its values checked already) under its table's ``keys``."""
    return "/".join(f"{key}={value}" for key, value in zip(keys, part.get("values") or [], strict=False))


def kind_creates_function(body: dict[str, Any]) -> bool:
    """A function snapshot complete enough to create (DROP_FUNCTION may carry only its name)."""
    return "class_name" in body["function"]
