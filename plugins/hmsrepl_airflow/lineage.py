"""OpenLineage for a replication task: which source tables it read and which replica tables it wrote.

Airflow's OpenLineage provider, when installed and configured, calls an operator's
``get_openlineage_facets_on_complete``; without the provider nothing here runs. Datasets are named as
OpenLineage names Hive tables (namespace ``hive://<metastore host>:<port>``, name ``<database>.<table>``), so a
lineage backend joins them with what Spark, Trino and Hive report for the same tables. The tables are those
the run's window of the source's notification log names (an incremental run), or the replica's tables after
a bootstrap, at most ``MAX_DATASETS`` of them: lineage is a map, not an inventory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hmsrepl_airflow.hooks import MetastoreNotificationHook

#: At most this many tables per run are reported (a bootstrap of a large warehouse would list them all).
MAX_DATASETS = 1000
#: Events are read in pages of this size to find the window's tables.
PAGE = 1000


@dataclass(frozen=True)
class ReplicatedWindow:
    """What one run replicated: the policy's database, the replica and the source events it applied."""

    source_db: str
    target_db: str
    previous_repl_last_id: int | None
    repl_last_id: int


def namespace(hook: MetastoreNotificationHook) -> str:
    """OpenLineage's namespace of a Hive metastore: ``hive://host:port``."""
    host, port, _ = hook.address()
    return f"hive://{host}:{port}"


def window_tables(source: MetastoreNotificationHook, window: ReplicatedWindow) -> list[str]:
    """Tables of the source database named by events in the window, in first-seen order."""
    assert window.previous_repl_last_id is not None
    found: dict[str, None] = {}
    last = window.previous_repl_last_id
    while last < window.repl_last_id and len(found) < MAX_DATASETS:
        events = source.next_events(last, PAGE)
        if not events:
            break
        for event in events:
            if event.event_id > window.repl_last_id:
                break
            if (event.db_name or "").lower() == window.source_db.lower() and event.table_name:
                found.setdefault(event.table_name.lower(), None)
        last = events[-1].event_id
    return list(found)[:MAX_DATASETS]


def replica_tables(target: MetastoreNotificationHook, target_db: str) -> list[str]:
    """Tables of the replica (after a bootstrap: everything it holds)."""
    names = target._call(f"the tables of '{target_db}'", "get_all_tables", target_db)
    return sorted(str(n).lower() for n in names)[:MAX_DATASETS]


def operator_lineage(
    source: MetastoreNotificationHook, target: MetastoreNotificationHook, window: ReplicatedWindow
) -> Any:
    """The provider's ``OperatorLineage`` for the run: one input and one output dataset per table."""
    from airflow.providers.common.compat.openlineage.facet import Dataset
    from airflow.providers.openlineage.extractors import OperatorLineage

    if window.previous_repl_last_id is None:
        tables = replica_tables(target, window.target_db)
    else:
        tables = window_tables(source, window)
    source_ns, target_ns = namespace(source), namespace(target)
    return OperatorLineage(
        inputs=[Dataset(namespace=source_ns, name=f"{window.source_db}.{t}") for t in tables],
        outputs=[Dataset(namespace=target_ns, name=f"{window.target_db}.{t}") for t in tables],
    )
