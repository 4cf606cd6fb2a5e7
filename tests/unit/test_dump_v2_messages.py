"""Format-2 messages through the dump's rewrites and the load's dump validation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.formats import listing_digest
from hmsrepl.metastore.events import EventType as E
from hmsrepl.metastore.events import NotificationEvent, encode_message
from hmsrepl.metastore.messages import DataChange, MessageBuilder, checksum_of, relative_path
from hmsrepl.replication.acid_replay import prepare_for_dump
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.dump_events import DumpEvent
from hmsrepl.replication.dump_validation import DumpValidator
from hmsrepl.replication.layout import DumpDir, DumpMetadata, encode_event
from hmsrepl.replication.replace import WindowPlan
from hmsrepl.replication.source_roots import SourceRoots
from tests.helpers import make_partition, make_table

CHECKSUM = "crc32c-00000001-3"


def snapshots(root: str, **params: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    table = make_table("db", "t", partition_keys=("p",), **params)
    table.sd.location = f"{root}/wh/db.db/t"
    parts = []
    for value in ("1", "2"):
        part = make_partition(table, value)
        part.sd = table.sd.model_copy(update={"location": f"{table.sd.location}/p={value}"})
        parts.append(part.model_dump(mode="json"))
    return table.model_dump(mode="json"), parts


def encoded(location: str, name: str, root: str) -> str:
    return f"{location}/{name}#{CHECKSUM}#{root}/cm#"


def event(event_id: int, kind: E, body: dict[str, Any]) -> DumpEvent:
    text, message_format = encode_message(body, compress=False, compress_min_bytes=0)
    return DumpEvent.of(NotificationEvent(event_id, 0, kind, "db", "t", text, message_format))


def added(location: str, root: str, *names: str) -> DataChange:
    files = tuple(encoded(location, name, root) for name in names)
    return DataChange(added=files, complete=True, count=len(files), digest=digest(files))


def digest(files: tuple[str, ...]) -> str:
    return listing_digest.of((relative_path(f), checksum_of(f)) for f in files)


def test_compaction_trims_a_partition_out_of_every_per_partition_list() -> None:
    table, parts = snapshots("/r")
    changes = [added(p["sd"]["location"], "/r", "a") for p in parts]
    body = MessageBuilder({"table": table, "partitions": parts}).with_partition_data(changes)
    plan = WindowPlan(actions={}, compacted=set(), trimmed={5: frozenset({"p=1"})})
    written = plan.rewrite(event(5, E.ADD_PARTITION, body))
    assert written is not None
    assert written.message.partition_names() == ("p=2",)
    assert written.message.files() == list(changes[1].added)


def test_acid_events_lose_their_data_changes_in_format_2() -> None:
    policy = parse_policy("db")
    table, parts = snapshots("/r", transactional="true")
    change = added(parts[0]["sd"]["location"], "/r", "a")
    adding = event(
        1,
        E.ADD_PARTITION,
        MessageBuilder({"table": table, "partitions": parts}).with_partition_data([change, change]),
    )
    prepared = prepare_for_dump(adding, policy)
    assert (
        prepared is not None
        and prepared.message.document()["data"] == [None, None]
        and prepared.message.files() == []
    )
    altering = MessageBuilder({"table": table, "before": parts[0], "after": parts[0]}).with_data(change)
    prepared = prepare_for_dump(event(2, E.ALTER_PARTITION, altering), policy)
    assert (
        prepared is not None
        and "data" not in prepared.message.document()
        and prepared.message.objects() == []
    )
    inserting = MessageBuilder({"table": table, "partition": parts[0]}).with_data(change)
    assert prepare_for_dump(event(3, E.INSERT, inserting), policy) is None
    plain_table, plain_parts = snapshots("/r")
    plain = MessageBuilder({"table": plain_table, "partition": plain_parts[0]}).with_data(change)
    plain_event = event(4, E.INSERT, plain)
    assert prepare_for_dump(plain_event, policy) is plain_event  # written as the log stored it


def validate(tmp_path: Path, edit: Callable[[dict[str, Any], str], None]) -> int:
    """Validate an incremental dump holding one format-2 INSERT (changed by ``edit``); returns files seen."""
    root = str(tmp_path)
    table, parts = snapshots(root)
    location = parts[0]["sd"]["location"]
    change = DataChange(added=(encoded(location, "b", root),), removed=("a",), count=1, digest="x")
    body = MessageBuilder({"table": table, "partition": parts[0]}).with_data(change)
    edit(body, location)
    dump = DumpDir(str(tmp_path / "dump"))
    doc = {"event_id": 1, "event_time": 0, "event_type": "INSERT", "db": "db", "table": "t", "message": body}
    dump.write_segment(1, [encode_event(doc, [])])
    meta = DumpMetadata("incremental", "db", "db", 0, 1, 1, event_count=1)
    roots = SourceRoots(f"{root}/wh", f"{root}/cm")
    report = DumpValidator(dump, meta, roots, lambda _: None, {"INSERT"}).validate_incremental(0, "")
    return report.files


def test_validation_checks_format_2_added_files_and_removed_paths(tmp_path: Path) -> None:
    assert validate(tmp_path, lambda body, location: None) == 1
    refusals: dict[str, tuple[Callable[[dict[str, Any], str], None], str]] = {
        "a file of another object": (
            lambda b, loc: b["data"].update(added=[encoded(loc.replace("p=1", "p=2"), "x", str(tmp_path))]),
            "not below its object's location",
        ),
        "a file outside the roots": (
            lambda b, loc: b["data"].update(added=[f"/etc/passwd#{CHECKSUM}#{tmp_path}/cm#"]),
            "outside",
        ),
        "a removed path leaving the object": (lambda b, loc: b["data"].update(removed=["../p=2/a"]), "'..'"),
        "a data change that is no object": (lambda b, loc: b.update(data=["a"]), "'data'"),
        "added files that are no list": (lambda b, loc: b["data"].update(added="abc"), "malformed"),
        "an unknown message format": (lambda b, loc: b.update(v=3), "message format '3'"),
    }
    for name, (edit, why) in refusals.items():
        with pytest.raises(DumpValidationError, match=why):
            validate(tmp_path / name.replace(" ", "_"), edit)
