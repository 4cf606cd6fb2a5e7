"""Column statistics in bootstrap dumps: one ``_column_stats`` document per dumped table, loaded with it.

Incremental dumps carry statistics as events (see event_handlers.py); a bootstrap carries the tables'
statistics as read once the dump's objects are final. They are read after the dump's last event, so a
statistics change made meanwhile can appear early on the replica; the incremental load that follows
replays that change's event again (updates are upserts, deletes of absent statistics are skipped), so the
replica converges on the source's statistics as of each loaded event id.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.statistics import ColumnStat
from hmsrepl.replication.layout import TABLE, DumpDir, DumpLayout
from hmsrepl.replication.source import ReplicationSource

COLUMN_STATS = "_column_stats"


def dump_column_stats(dump: DumpDir, source: ReplicationSource, db_name: str) -> int:
    """Write the statistics of every table the bootstrap dump holds; returns how many groups were written."""
    written = 0
    stored = source.stats.dump_database(db_name)  # one read; a table dropped since has none
    for relative, found in dump.entries(db_name):
        if found.kind != TABLE:
            continue
        groups = stored.get(dump.read_json(relative)["table"]["table_name"])
        if groups:
            dump.write_json(DumpLayout.beside(relative, COLUMN_STATS), {"column_stats": groups})
            written += len(groups)
    return written


def load_column_stats(
    dump: DumpDir, target: Metastore, source_db: str, target_db: str, table: dict[str, Any]
) -> None:
    """Store a dumped table's statistics on the replica (inside the transaction that loads the table)."""
    relative = DumpLayout.beside(DumpLayout.table(source_db, table["table_name"]), COLUMN_STATS)
    if not dump.exists(relative):
        return
    for group in dump.read_json(relative)["column_stats"]:
        with contextlib.suppress(NoSuchObjectError):  # a partition the dump does not hold
            target.stats.update(
                target_db,
                table["table_name"],
                [ColumnStat.from_json(doc) for doc in group["stats"]],
                partition_name=group.get("partition"),
                engine=group.get("engine"),
                last_analyzed=group.get("last_analyzed"),
            )
