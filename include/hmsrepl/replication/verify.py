"""Compares a source database with its replica: metadata and file checksums, every difference reported.

Objects are compared as replication promises them: names, schemas, storage formats and parameters equal;
locations compared relative to their database (the replica lives in another warehouse); data compared as
``relative path -> checksum`` per table or partition. Parameters the metastore or the replica itself own
(``repl.*``, replica markers, ``transient_lastDdlTime``) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import list_data_files
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.target import TARGET_ONLY_PARAMS, VOLATILE_PARAMS
from hmsrepl.storage.base import filesystem_for, relative_to

IGNORED_PARAMS = set(TARGET_ONLY_PARAMS) | set(VOLATILE_PARAMS)


@dataclass
class ObjectState:
    metadata: dict[str, Any]
    files: dict[str, str] | None


@dataclass
class DatabaseState:
    parameters: dict[str, str]
    functions: dict[str, dict[str, Any]]
    tables: dict[str, ObjectState] = field(default_factory=dict)
    partitions: dict[tuple[str, str], ObjectState] = field(default_factory=dict)


def _files(location: str | None) -> dict[str, str]:
    if not location:
        return {}
    fs = filesystem_for(location)
    return {relative_to(s.uri, location): fs.checksum(s.uri) for s in list_data_files(location)}


def _relative_location(location: str | None, root: str | None) -> str | None:
    if not location:
        return None
    if root and location.rstrip("/").startswith(root.rstrip("/") + "/"):
        return location.rstrip("/")[len(root.rstrip("/")) + 1 :]
    return "<outside database location>"


def _normalise(obj: Table | Partition, root: str | None) -> dict[str, Any]:
    data = obj.model_dump(
        mode="json", exclude={"id", "write_id", "create_time", "last_access_time", "db_name"}
    )
    data["parameters"] = {k: v for k, v in obj.parameters.items() if k not in IGNORED_PARAMS}
    data["sd"]["location"] = _relative_location(obj.sd.location, root)
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
    for table in catalog.get_table_objects(db_name, tables):
        state.tables[table.table_name] = ObjectState(
            _normalise(table, root),
            _files(table.sd.location) if with_files and not table.partition_keys else None,
        )
        for part in catalog.get_partitions(db_name, table.table_name) if table.partition_keys else []:
            name = make_partition_name(table.partition_key_names, part.values)
            state.partitions[(table.table_name, name)] = ObjectState(
                _normalise(part, root), _files(part.sd.location) if with_files else None
            )
    return state


def diff_states(source: DatabaseState, replica: DatabaseState) -> list[str]:
    """Human-readable differences; empty when the replica equals the source."""
    out: list[str] = []
    if source.parameters != replica.parameters:
        out.append(f"database parameters differ: source {source.parameters} != replica {replica.parameters}")
    for kind, left, right in (
        ("function", source.functions, replica.functions),
        ("table", source.tables, replica.tables),
        ("partition", source.partitions, replica.partitions),
    ):
        for name in sorted(set(left) | set(right), key=str):
            label = "/".join(name) if isinstance(name, tuple) else name
            if name not in right:
                out.append(f"{kind} {label} is missing on the replica")
            elif name not in left:
                out.append(f"{kind} {label} exists only on the replica")
            elif isinstance(left[name], ObjectState):
                a, b = left[name], right[name]
                if a.metadata != b.metadata:
                    keys = sorted(
                        k for k in set(a.metadata) | set(b.metadata) if a.metadata.get(k) != b.metadata.get(k)
                    )
                    out.append(f"{kind} {label}: metadata differs in {keys}")
                if a.files is not None and b.files is not None and a.files != b.files:
                    missing = sorted(set(a.files) - set(b.files))
                    extra = sorted(set(b.files) - set(a.files))
                    changed = sorted(k for k in set(a.files) & set(b.files) if a.files[k] != b.files[k])
                    out.append(
                        f"{kind} {label}: files differ (missing {missing}, extra {extra}, checksum {changed})"
                    )
            elif left[name] != right[name]:
                out.append(f"{kind} {label}: definition differs")
    return out


def verify(
    source: Metastore,
    source_db: str,
    target: Metastore,
    target_db: str,
    policy: ReplicationPolicy | None = None,
) -> list[str]:
    return diff_states(capture_state(source, source_db, policy), capture_state(target, target_db, policy))
