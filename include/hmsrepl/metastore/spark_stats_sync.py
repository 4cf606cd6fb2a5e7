"""Keep Spark's statistics parameters and Hive's column statistics consistent, in both directions.

The rule (``spark_stats`` translates):

- **Spark -> Hive.** A client write of a table (or partition) whose Spark column statistics parameters
  changed stores, in the same transaction, the translated Hive statistics of those columns (engine
  ``hive``; UPDATE_*_COLUMN_STAT events, so they replicate as any other statistics). When Spark removes a
  column's parameters (its INSERT does, the data changed), the column's Hive statistics are deleted too
  if they are still the translation of what Spark removed; statistics another engine wrote since stay.
- **Hive -> Spark.** A client write of Hive statistics (``update_*_column_statistics``,
  ``set_aggr_stats_for``) of a column that has Spark parameters rewrites those parameters from the stored
  result (after any merge), and a delete of Hive statistics removes them: Spark never plans with numbers
  Hive's statistics contradict. Columns without Spark parameters get none (Spark computes its own).
  Only the default engine's statistics (``hive``) are followed; another engine's are its own business.
- **Row counts.** A new ``spark.sql.statistics.numRows`` is Hive's ``numRows`` too, marked accurate in
  ``COLUMN_STATS_ACCURATE``; when Spark drops its count (its INSERT does), a ``numRows`` still equal to it
  becomes ``-1`` (unknown) and loses the mark. The rest of ``numRows``, ``numFiles`` and ``totalSize``:
  ``metastore.basic_stats``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hmsrepl.formats.partition_names import parse_partition_name
from hmsrepl.metastore.basic_stats import mark_accurate
from hmsrepl.metastore.catalog import CatalogService
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.payloads import ColumnStat
from hmsrepl.metastore.spark_stats import (
    COL_STATS_PREFIX,
    NUM_ROWS,
    SparkColumn,
    row_count,
    spark_columns,
    spark_params,
    to_hive,
    to_spark,
)
from hmsrepl.metastore.statistics import DEFAULT_ENGINE, StatisticsService


def has_spark_stats(params: Mapping[str, str] | None) -> bool:
    """Whether ``params`` hold any of Spark's statistics (the cheap test before any sync work)."""
    return bool(params) and any(key.startswith(COL_STATS_PREFIX) or key == NUM_ROWS for key in params or {})


def with_row_count(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """``after`` with Hive's ``numRows`` set from a row count Spark measured in this write (new or changed),
    or made unknown where it was Spark's count and Spark dropped it."""
    out = dict(after)
    rows, previous = row_count(after), row_count(before)
    if rows is None and previous is not None and out.get("numRows") == str(previous):
        # Spark dropped its count (its INSERT changed the data): the copy in numRows is stale too.
        out["numRows"] = "-1"
        return mark_accurate(out, False)
    if rows is None or rows == previous:
        return out
    out["numRows"] = str(rows)
    return mark_accurate(out, True)


class SparkStatsSync:
    """Both directions of the rule above, each inside the caller's write transaction."""

    def __init__(self, catalog: CatalogService, stats: StatisticsService) -> None:
        self.catalog = catalog
        self.stats = stats

    def follow_params(
        self,
        table: Table,
        partition_name: str | None,
        before: Mapping[str, str],
        after: Mapping[str, str],
    ) -> None:
        """Hive's statistics follow the Spark parameters a write of ``table`` (or its partition) changed."""
        old, new = spark_columns(before), spark_columns(after)
        if not old and not new:
            return
        types = {c.name.lower(): c.type for c in table.sd.cols}
        old_rows, new_rows = row_count(before), row_count(after)
        updates: list[ColumnStat] = []
        for col, column in new.items():
            if col not in types:
                continue
            stat = to_hive(column, col, types[col], new_rows)
            previous = old.get(col)
            if stat is None or (previous and to_hive(previous, col, types[col], old_rows) == stat):
                continue
            updates.append(stat)
        db_name, table_name = table.db_name, table.table_name
        if updates:
            self.stats.update(db_name, table_name, updates, partition_name=partition_name)
        for col, column in old.items():
            if col in new or col not in types:
                continue
            expected = to_hive(column, col, types[col], old_rows)
            if expected is not None and self._stored(table, partition_name, [col]).get(col) == expected:
                self.stats.delete(db_name, table_name, col, partition_name=partition_name)

    def follow_stats(
        self,
        db_name: str,
        table_name: str,
        partition_name: str | None,
        col_names: Sequence[str] | None,
        engine: str | None,
    ) -> None:
        """Spark's parameters of the columns whose Hive statistics a client just wrote or deleted (None: all
        columns) follow what is stored now."""
        if (engine or DEFAULT_ENGINE) != DEFAULT_ENGINE:
            return
        table = self.catalog.get_table(db_name, table_name)
        part = self._partition(table, partition_name) if partition_name else None
        params = (part or table).parameters
        columns = spark_columns(params)
        touched = [c for c in (col_names if col_names is not None else columns) if c.lower() in columns]
        if not touched:
            return
        stored = self._stored(table, partition_name, touched)
        updated = dict(params)
        for col in (c.lower() for c in touched):
            column: SparkColumn = columns[col]
            for key in column.param_keys():
                updated.pop(key, None)
            if col in stored:
                updated.update(spark_params(column, to_spark(stored[col], column)))
        if updated == params:
            return
        if part is None:
            changed = table.model_copy(update={"parameters": updated})
            self.catalog.alter_table(table.db_name, table.table_name, changed, capture_files=False)
        else:
            changed_part = part.model_copy(update={"parameters": updated})
            self.catalog.alter_partitions(
                table.db_name, table.table_name, [changed_part], capture_files=False
            )

    def _stored(self, table: Table, partition_name: str | None, cols: Sequence[str]) -> dict[str, ColumnStat]:
        if partition_name is None:
            found = self.stats.table_stats(table.db_name, table.table_name, cols)
        else:
            by_part = self.stats.partition_stats(table.db_name, table.table_name, [partition_name], cols)
            found = by_part.get(partition_name, [])
        return {stat.col_name: stat for stat in found}

    def _partition(self, table: Table, partition_name: str) -> Partition:
        values = [value for _key, value in parse_partition_name(partition_name)]
        return self.catalog.get_partition(table.db_name, table.table_name, values)
