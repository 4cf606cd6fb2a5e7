"""Rewrite a dump's data events between message format 1 (complete listings) and format 2 (deltas).

Loads must apply both formats to the same result: logs written before format 2 still hold format-1 events.
Tests and the load benchmark make one format's dump from the other's: each object's listing is followed
from the bootstrap dump through the events; a format-2 event gets the difference from the object's previous
listing with the count and digest after it (as a capture records them), a format-1 event the whole listing.
"""

from __future__ import annotations

from typing import Any

from hmsrepl.formats import listing_digest
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.event_specs import DATA_KINDS, Scope, parse, spec_of
from hmsrepl.metastore.messages import (
    AddPartitionMessage,
    DataChange,
    MessageBuilder,
    checksum_of,
    partition_key_names,
    relative_path,
)
from hmsrepl.replication.layout import FILES, METADATA, TABLE, DumpDir, DumpLayout
from tests.dump_events import read_events, rewrite_events

Key = tuple[str, str | None]  # (table name, partition name or None)


def bootstrap_listings(bootstrap_dir: str, db: str) -> dict[Key, dict[str, str]]:
    """Each object's listing (relative path -> encoded URI) in a bootstrap dump."""
    dump = DumpDir(bootstrap_dir)
    out: dict[Key, dict[str, str]] = {}
    for relative in dump.metadata_files(db):
        found = DumpLayout.entry(relative)
        if found.kind != TABLE or found.table is None:
            continue
        doc = dump.read_json(relative)
        keys = partition_key_names(doc["table"])
        files = dump.read_files(relative[: -len(METADATA)] + FILES)
        out[(found.table, None)] = {relative_path(f): f for f in files}
        for dumped in dump.partitions(DumpLayout.table_dir(db, found.table)):
            key = (found.table, make_partition_name(keys, dumped.document["partition"]["values"]))
            out[key] = {relative_path(f): f for f in dumped.files or []}
    return out


def delta(before: dict[str, str], after: dict[str, str]) -> DataChange:
    added = tuple(
        e for rel, e in after.items() if rel not in before or checksum_of(before[rel]) != checksum_of(e)
    )
    removed = tuple(rel for rel in before if rel not in after)
    digest = listing_digest.of((rel, checksum_of(e)) for rel, e in after.items())
    return DataChange(added, removed, False, len(after), digest)


def to_format_2(dump_dir: str, listings: dict[Key, dict[str, str]]) -> int:
    """Rewrite every format-1 data event of an incremental dump as format 2, in place (see ``to_format``)."""
    return to_format(dump_dir, listings, 2)


def to_format_1(dump_dir: str, listings: dict[Key, dict[str, str]]) -> int:
    """Rewrite every format-2 data event of an incremental dump as format 1, in place (see ``to_format``)."""
    return to_format(dump_dir, listings, 1)


def _format_1_body(body: dict[str, Any], msg: Any, after: dict[Key, dict[str, str]], table: str) -> dict:
    out = {k: v for k, v in body.items() if k not in ("v", "data")}
    if isinstance(msg, AddPartitionMessage):
        out["files"] = [
            list(after[(table, name)].values()) if change is not None else None
            for name, change in zip(msg.partition_names(), msg.changes(), strict=True)
        ]
        return out
    (listing,) = after.values() if after else (None,)
    out["files"] = list(listing.values()) if listing is not None else []
    if listing is not None and not listing and msg.kind != "INSERT":
        out["is_truncate"] = True
    return out


def to_format(dump_dir: str, listings: dict[Key, dict[str, str]], version: int) -> int:
    """Rewrite every data event of an incremental dump that is not in ``version`` in place; ``listings``
    (each object's listing, from ``bootstrap_listings``) is updated as it goes.

    Returns how many events were rewritten.
    """
    rewritten = 0

    def rewrite(doc: dict[str, Any]) -> dict[str, Any]:
        nonlocal rewritten
        kind, body = doc["event_type"], doc["message"]
        msg = parse(kind, body, doc.get("db"), doc.get("table"))
        table = msg.table.table_name if msg.table is not None else None
        spec = spec_of(kind)
        if spec.drops:  # a later object of the same name starts empty
            names = set(msg.partition_names()) if spec.scope is Scope.PARTITION else None
            for key in [k for k in listings if k[0] == table and (names is None or k[1] in names)]:
                del listings[key]
        if kind not in DATA_KINDS:
            return doc
        if msg.rename_target is not None:
            old = msg.before.table_name
            for key in [k for k in listings if k[0] == old]:
                listings[(msg.rename_target, key[1])] = listings.pop(key)
        changes: dict[Key, DataChange] = {}
        afters: dict[Key, dict[str, str]] = {}
        for obj in msg.objects():
            key = (table, obj.partition_name)
            previous = {} if spec.structural else listings.get(key, {})
            after = obj.change.apply(previous)
            changes[key] = delta(previous, after)
            listings[key] = afters[key] = after
        if body.get("v", 1) == version:
            return doc
        builder = MessageBuilder(dict(body))
        if version == 1:
            new_body = _format_1_body(body, msg, afters, table)
        elif isinstance(msg, AddPartitionMessage):
            new_body = builder.with_partition_data(
                changes[(table, name)] if old is not None else None
                for name, old in zip(msg.partition_names(), msg.changes(), strict=True)
            )
        else:
            (change,) = changes.values() if changes else (None,)
            new_body = builder.with_data(change)
        doc["message"] = new_body
        if doc["files"]:  # what the load checks beforehand
            doc["files"] = parse(kind, new_body).files()
        rewritten += 1
        return doc

    rewrite_events(dump_dir, rewrite)
    return rewritten


def message_versions(dump_dir: str) -> list[Any]:
    return [doc["message"].get("v", 1) for doc in read_events(dump_dir)]
