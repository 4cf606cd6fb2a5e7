"""Compares a source database with its replica: metadata and file checksums, every difference reported.

Objects are compared as replication promises them: names, schemas, storage formats and parameters equal;
locations compared relative to their database (the replica lives in another warehouse); data compared as
``relative path -> checksum`` per table or partition; for ACID tables that is the snapshot a reader with the
store's current ValidWriteIdList reads, plus the write-id state itself (high watermark, open and aborted
ids), so a replica equals its source when its readers see what the source's saw at the same event id. An ACID
location compacted on one side only holds the same rows in other files: it is equal when the files' checksums
or, failing that, its rows are (``acid_content``).
Parameters the metastore or the replica itself own (``repl.*``, replica markers, ``transient_lastDdlTime``)
are left out. Locations are compared without the version marks of the replica's directories
(``t.hmsrepl-v12`` is ``t``): files are compared relative to each object's own location, so the name of the
directory a load published a version in is not a difference. Leftovers are: anything under the replica
database's directory, or among the entries a replica owns outside it (its external tables' directories,
``replica_dirs``), that no table or partition names (old versions, staged copies, dropped objects'
directories) is reported, and so is every location the source's metadata names that does not exist on the
source (``named_locations``): a replica equal to a broken source is not a healthy pair.

A table-level policy replica is compared with the policy's tables of the source (and every table of the
replica: one outside the policy is a difference); a metadata-only replica is compared without data files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import list_data_files
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.replication import iceberg
from hmsrepl.replication.acid_content import RowDigest, RowReader, row_reader
from hmsrepl.replication.acid_replay import visible_statuses
from hmsrepl.replication.filecopy import logical_location
from hmsrepl.replication.leftovers import Retirer, find_leftovers
from hmsrepl.replication.lost_files import FIX, STALE
from hmsrepl.replication.named_locations import missing_locations
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.replica_dirs import external_dirs
from hmsrepl.replication.target import TARGET_ONLY_PARAMS, VOLATILE_PARAMS
from hmsrepl.storage.base import is_hidden, join_uri, relative_to
from hmsrepl.storage.rooted import RootedFileSystem

IGNORED_PARAMS = set(TARGET_ONLY_PARAMS) | set(VOLATILE_PARAMS)


@dataclass
class ObjectState:
    metadata: dict[str, Any]
    files: dict[str, str] | None
    stale: str | None = None  # the replica's stale mark (``lost_files``): why it may differ
    # An ACID location's rows, read only when its files differ from the other side's (``acid_content``).
    rows: RowReader | None = field(default=None, compare=False, repr=False)


@dataclass
class DatabaseState:
    parameters: dict[str, str]
    functions: dict[str, dict[str, Any]]
    tables: dict[str, ObjectState] = field(default_factory=dict)
    partitions: dict[tuple[str, str], ObjectState] = field(default_factory=dict)


def _files(fs: RootedFileSystem, location: str | None) -> dict[str, str]:
    if not location:
        return {}
    return {relative_to(s.uri, location): fs.checksum(s.uri) for s in list_data_files(fs, location)}


def _relative_location(location: str | None, root: str | None) -> str | None:
    if not location:
        return None
    location = logical_location(location)
    if root and location.rstrip("/").startswith(root.rstrip("/") + "/"):
        return location.rstrip("/")[len(root.rstrip("/")) + 1 :]
    return "<outside database location>"


def _normalise(obj: Table | Partition, root: str | None) -> dict[str, Any]:
    data = obj.model_dump(
        mode="json", exclude={"id", "write_id", "create_time", "last_access_time", "db_name"}
    )
    params = iceberg.comparable_parameters(obj)
    data["parameters"] = {k: v for k, v in params.items() if k not in IGNORED_PARAMS}
    data["sd"]["location"] = _relative_location(obj.sd.location, root)
    if isinstance(obj, Table) and obj.constraints is not None and obj.constraints.is_empty():
        del data["constraints"]  # none left after a drop is none (a stock source answers None)
    return data


def capture_state(
    store: Metastore, db_name: str, policy: ReplicationPolicy | None = None, *, with_files: bool = True
) -> DatabaseState:
    """The replicated state of one database, normalised so a source and its replica compare equal."""
    catalog = store.catalog
    db = catalog.get_database(db_name)
    state = DatabaseState(
        parameters={k: v for k, v in db.parameters.items() if k not in IGNORED_PARAMS},
        functions={
            name: catalog.get_function(db_name, name).model_dump(
                mode="json", exclude={"db_name", "create_time"}
            )
            for name in catalog.get_functions(db_name)
        },
    )
    root = db.location_uri
    tables = [t for t in catalog.get_tables(db_name) if policy is None or policy.includes_table(t)]
    objects = catalog.get_table_objects(db_name, tables)
    acid = [t for t in objects if t.is_transactional]
    valid_txns = store.txns.get_valid_txns() if acid else None
    snapshots = {
        t.table_name: entry.write_ids
        for t, entry in zip(
            acid, store.txns.get_valid_write_ids([t.qualified_name for t in acid], valid_txns), strict=True
        )
    }
    for table in objects:
        write_ids = snapshots.get(table.table_name)

        def files(
            location: str | None, ids: ValidWriteIdList | None = write_ids, table: Table = table
        ) -> tuple[dict[str, str] | None, RowReader | None]:
            if not with_files:
                return None, None
            fs = store.cm.files  # the metastore's data roots: a location outside them is refused
            if ids is None:
                return _files(fs, location), None
            visible = _visible_files(fs, location, ids, valid_txns)
            uris = [join_uri(location, path) for path in sorted(visible)] if location else []
            return visible, row_reader(fs, table, uris)

        metadata = _normalise(table, root)
        if write_ids is not None:
            metadata["write_ids"] = _write_id_state(write_ids)
        own, rows = files(table.sd.location) if not table.partition_keys else (None, None)
        state.tables[table.table_name] = ObjectState(metadata, own, table.parameters.get(STALE), rows)
        for part in catalog.get_partitions(db_name, table.table_name) if table.partition_keys else []:
            name = make_partition_name(table.partition_key_names, part.values)
            part_files, part_rows = files(part.sd.location)
            state.partitions[(table.table_name, name)] = ObjectState(
                _normalise(part, root), part_files, part.parameters.get(STALE), part_rows
            )
    return state


def _write_id_state(write_ids: ValidWriteIdList) -> str:
    """A table's ValidWriteIdList without its name (a replica's database has another name)."""
    return write_ids.to_string().split(":", 1)[1]


def _visible_files(
    fs: RootedFileSystem, location: str | None, write_ids: ValidWriteIdList, valid_txns: ValidTxnList | None
) -> dict[str, str]:
    """What a reader holding ``write_ids`` reads of an ACID location: relative path -> checksum.

    Raw listings of an ACID table differ between a source and its replica by design (files of open and
    aborted txns are never copied); the snapshots must not.
    """
    assert valid_txns is not None
    statuses = visible_statuses(fs, location, write_ids, valid_txns)
    if not statuses or not location:
        return {}
    return {
        relative_to(s.uri, location): fs.checksum(s.uri)
        for s in statuses
        if not is_hidden(relative_to(s.uri, location))
    }


def diff_states(source: DatabaseState, replica: DatabaseState) -> list[str]:
    """Human-readable differences; empty when the replica equals the source."""
    out: list[str] = []
    if source.parameters != replica.parameters:
        out.append(f"database parameters differ: source {source.parameters} != replica {replica.parameters}")
    out += _diff_family("function", source.functions, replica.functions)
    out += _diff_family("table", source.tables, replica.tables)
    out += _diff_family("partition", source.partitions, replica.partitions)
    return out


def _diff_family(kind: str, left: Mapping[Any, object], right: Mapping[Any, object]) -> list[str]:
    """Differences among one family of objects (functions, tables or partitions), keyed by name."""
    out: list[str] = []
    for name in sorted(set(left) | set(right), key=str):
        label = "/".join(name) if isinstance(name, tuple) else str(name)
        if name not in right:
            out.append(f"{kind} {label} is missing on the replica")
        elif name not in left:
            out.append(f"{kind} {label} exists only on the replica")
        else:
            a, b = left[name], right[name]
            if isinstance(a, ObjectState) and isinstance(b, ObjectState):
                out += _diff_object(kind, label, a, b)
            elif a != b:
                out.append(f"{kind} {label}: definition differs")
    return out


def _diff_object(kind: str, label: str, a: ObjectState, b: ObjectState) -> list[str]:
    """Differences of one table or partition: its metadata, then its files' checksums."""
    out: list[str] = []
    if a.metadata != b.metadata:
        keys = sorted(k for k in set(a.metadata) | set(b.metadata) if a.metadata.get(k) != b.metadata.get(k))
        out.append(f"{kind} {label}: metadata differs in {keys}")
    if a.files is not None and b.files is not None and a.files != b.files:
        same = same_rows(a, b)
        if same is True:
            return out
        missing = sorted(set(a.files) - set(b.files))
        extra = sorted(set(b.files) - set(a.files))
        changed = sorted(k for k in set(a.files) & set(b.files) if a.files[k] != b.files[k])
        why = f"; marked stale on the replica ({b.stale}): {FIX}" if b.stale else ""
        rows = f"; {same}" if isinstance(same, str) else ""
        out.append(
            f"{kind} {label}: files differ (missing {missing}, extra {extra}, checksum {changed}){rows}{why}"
        )
    return out


def same_rows(a: ObjectState, b: ObjectState) -> bool | str:
    """Whether two ACID locations whose files differ still give readers the same rows (``acid_content``):
    True, False (not an ACID location), or one line saying how they differ or why it cannot be told."""
    if a.rows is None or b.rows is None or a.files is None or b.files is None:
        return False
    if sorted(a.files.values()) == sorted(b.files.values()):
        return True  # the same files in other directories (a copy-engine compaction on one side)
    left, right = a.rows(), b.rows()
    for side, found in (("source", left), ("replica", right)):
        if isinstance(found, str):
            return f"compacted differently on each side? {side}: {found}"
    if left == right:
        return True
    assert isinstance(left, RowDigest) and isinstance(right, RowDigest)
    return f"rows differ too (source {left.rows}, replica {right.rows})"


def verify(
    source: Metastore,
    source_db: str,
    target: Metastore,
    target_db: str,
    policy: ReplicationPolicy | None = None,
    *,
    metadata_only: bool = False,
) -> list[str]:
    """Every difference between ``source_db`` (its tables in ``policy``) and its replica, and the replica's
    leftovers; ``metadata_only``: data files are not compared (a replica of metadata-only dumps)."""
    with_files = not metadata_only
    differences = diff_states(
        capture_state(source, source_db, policy, with_files=with_files),
        capture_state(target, target_db, with_files=with_files),
    )
    broken = [f"missing on the source: {line}" for line in missing_locations(source, source_db, policy)]
    return (
        differences
        + broken
        + [f"leftover on the replica: {entry}" for entry in replica_leftovers(target, target_db)]
    )


def replica_leftovers(target: Metastore, target_db: str) -> list[str]:
    """What the replica owns without metadata naming it: relative paths under its database's directory,
    full URIs elsewhere (its external tables' directories)."""
    db = target.catalog.get_database(target_db)
    root = db.location_uri or target.catalog.default_db_location(target_db)
    found = find_leftovers(target, root).describe(root) if target.cm.files.exists(root) else []
    tickets = Retirer(target, target_db).tickets  # directories awaiting retirement are not leftovers
    for owned in external_dirs(target, target_db):
        if target.cm.files.exists(owned.root):
            entries = find_leftovers(target, owned.root, tickets=tickets).describe(owned.root)
            found += [f"{owned.root.rstrip('/')}/{entry}" for entry in entries if owned.owns(entry)]
    return found
