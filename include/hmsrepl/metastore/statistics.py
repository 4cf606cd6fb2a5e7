"""Column statistics of tables and partitions (Hive's TAB_COL_STATS / PART_COL_STATS), with their events.

Query engines (Trino, Hive, Spark) read them to plan joins and write them after ANALYZE; Trino has no
fallback when the calls are missing. One row per (table, partition or none, column, engine) holds Hive's
``ColumnStatisticsData`` union as JSON. Rows are keyed by table and partition ids, so a rename keeps them and
a drop removes them (foreign keys cascade). Every change logs an event named as Hive names it
(UPDATE_TABLE_COLUMN_STAT, UPDATE_PARTITION_COLUMN_STAT, DELETE_TABLE_COLUMN_STAT,
DELETE_PARTITION_COLUMN_STAT) in the same database transaction.

Aggregation over partitions (``aggregate``) follows Hive's mergers without extrapolation: low values take the
minimum, high values and NDVs and column lengths the maximum, null and true/false counts the sum; bit
vectors are not merged (dropped).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from hmsrepl.exceptions import InvalidInputError, InvalidObjectError, NoSuchObjectError, NoSuchPartitionError
from hmsrepl.metastore.catalog import CatalogService
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.payloads import ColumnStat as ColumnStat
from hmsrepl.metastore.payloads import DeleteColumnStatBody, UpdateColumnStatBody
from hmsrepl.metastore.schema import column_stats, dbs, partitions, tbls

KINDS = (
    "booleanStats",
    "longStats",
    "doubleStats",
    "stringStats",
    "binaryStats",
    "decimalStats",
    "dateStats",
    "timestampStats",
)
DEFAULT_ENGINE = "hive"


class StatisticsService:
    def __init__(self, catalog: CatalogService) -> None:
        self.catalog = catalog
        self.events = catalog.events

    # -- writes -----------------------------------------------------------------------------------------
    def update(
        self,
        db_name: str,
        table_name: str,
        stats: Sequence[ColumnStat],
        *,
        partition_name: str | None = None,
        engine: str | None = None,
        last_analyzed: int | None = None,
        merge: bool = False,
    ) -> None:
        """Store statistics of a table's (or one partition's) columns, replacing or (``merge``) merging."""
        db_name, table_name, engine = db_name.lower(), table_name.lower(), engine or DEFAULT_ENGINE
        analyzed = last_analyzed or int(time.time())
        with self.events.transaction() as tx:
            conn = tx.conn
            tbl_id, part_id, columns = self._target(conn, db_name, table_name, partition_name)
            stored: list[ColumnStat] = []
            for stat in stats:
                stat = _validated(stat, columns, db_name, table_name, partition_name)
                key = _key(tbl_id, part_id, stat.col_name, engine)
                row = conn.execute(select(column_stats.c.id, column_stats.c.stats).where(*key)).first()
                if row is not None and merge:
                    stat = merge_stats(ColumnStat.from_json(json.loads(row.stats)), stat)
                values = {
                    "col_type": stat.col_type,
                    "stats": json.dumps(stat.to_json()),
                    "last_analyzed": analyzed,
                }
                if row is None:
                    conn.execute(
                        insert(column_stats).values(
                            tbl_id=tbl_id,
                            part_id=part_id,
                            part_key=part_id or 0,
                            col_name=stat.col_name,
                            engine=engine,
                            **values,
                        )
                    )
                else:
                    conn.execute(update(column_stats).where(column_stats.c.id == row.id).values(**values))
                stored.append(stat)
            kind = (
                EventType.UPDATE_PARTITION_COLUMN_STAT
                if partition_name
                else EventType.UPDATE_TABLE_COLUMN_STAT
            )
            tx.emit(
                kind,
                db_name,
                table_name,
                UpdateColumnStatBody(
                    partition=partition_name, engine=engine, last_analyzed=analyzed, stats=stored
                ),
            )

    def delete(
        self,
        db_name: str,
        table_name: str,
        col_name: str | None = None,
        *,
        partition_name: str | None = None,
        engine: str | None = None,
    ) -> int:
        """Delete one column's statistics (or, without ``col_name``, all of the table's or partition's)."""
        db_name, table_name, engine = db_name.lower(), table_name.lower(), engine or DEFAULT_ENGINE
        with self.events.transaction() as tx:
            conn = tx.conn
            tbl_id, part_id, _columns = self._target(conn, db_name, table_name, partition_name)
            where = [
                column_stats.c.tbl_id == tbl_id,
                column_stats.c.part_key == (part_id or 0),
                column_stats.c.engine == engine,
            ]
            if col_name:
                where.append(column_stats.c.col_name == col_name.lower())
            names = sorted(conn.execute(select(column_stats.c.col_name).where(*where)).scalars())
            if col_name and not names:
                raise NoSuchObjectError(
                    f"column '{col_name}' of {_describe(db_name, table_name, partition_name)} has no statistics"
                    f" for engine '{engine}'; nothing to delete"
                )
            conn.execute(delete(column_stats).where(*where))
            kind = (
                EventType.DELETE_PARTITION_COLUMN_STAT
                if partition_name
                else EventType.DELETE_TABLE_COLUMN_STAT
            )
            if names:
                tx.emit(
                    kind,
                    db_name,
                    table_name,
                    DeleteColumnStatBody(partition=partition_name, engine=engine, columns=names),
                )
        return len(names)

    # -- reads ------------------------------------------------------------------------------------------
    def table_stats(
        self,
        db_name: str,
        table_name: str,
        col_names: Iterable[str] | None = None,
        *,
        engine: str | None = None,
    ) -> list[ColumnStat]:
        found = self.partition_stats(db_name, table_name, None, col_names, engine=engine)
        return found.get(None, [])

    def partition_stats(
        self,
        db_name: str,
        table_name: str,
        partition_names: Sequence[str] | None,
        col_names: Iterable[str] | None = None,
        *,
        engine: str | None = None,
    ) -> dict[str | None, list[ColumnStat]]:
        """Statistics by partition name (None: the table's own), in the order of ``col_names``."""
        db_name, table_name, engine = db_name.lower(), table_name.lower(), engine or DEFAULT_ENGINE
        wanted = [c.lower() for c in col_names] if col_names is not None else None
        with self.events.reader() as conn:
            tbl_id, table = self.catalog.core.load_table(conn, db_name, table_name)
            query = (
                select(column_stats.c.col_name, column_stats.c.stats, partitions.c.part_name)
                .outerjoin(partitions, partitions.c.part_id == column_stats.c.part_id)
                .where(column_stats.c.tbl_id == tbl_id, column_stats.c.engine == engine)
            )
            if partition_names is None:
                query = query.where(column_stats.c.part_key == 0)
            else:
                query = query.where(partitions.c.part_name.in_(list(partition_names)))
            if wanted is not None:
                query = query.where(column_stats.c.col_name.in_(wanted))
            out: dict[str | None, dict[str, ColumnStat]] = {}
            # Statistics of a column an alter_table dropped or retyped describe data the column no longer
            # has (Hive deletes them then): they are not returned.
            current = {c.name.lower(): _type_key(c.type) for c in table.sd.cols}
            for row in conn.execute(query):
                stat = ColumnStat.from_json(json.loads(row.stats))
                if current.get(stat.col_name) == _type_key(stat.col_type):
                    out.setdefault(row.part_name, {})[row.col_name] = stat
        order = wanted or sorted({c for found in out.values() for c in found})
        return {part: [found[c] for c in order if c in found] for part, found in out.items()}

    def dump_table(self, db_name: str, table_name: str) -> list[dict[str, Any]]:
        """Every statistics row of a table and its partitions, all engines (what a bootstrap dump carries)."""
        db_name, table_name = db_name.lower(), table_name.lower()
        c = column_stats.c
        with self.events.reader() as conn:
            tbl_id, _table = self.catalog.core.load_table(conn, db_name, table_name)
            rows = conn.execute(_STATS_ROWS.where(c.tbl_id == tbl_id).order_by(*_STATS_ORDER)).all()
        return _groups(rows)

    def dump_database(self, db_name: str) -> dict[str, list[dict[str, Any]]]:
        """``dump_table`` for every table of a database that has statistics, by table name, in one statement
        (a bootstrap dump asks for all of them; one read per table is a round trip per table)."""
        c = column_stats.c
        query = (
            _STATS_ROWS.add_columns(tbls.c.tbl_name)
            .join(tbls, tbls.c.tbl_id == c.tbl_id)
            .join(dbs, dbs.c.db_id == tbls.c.db_id)
            .where(dbs.c.name == db_name.lower())
            .order_by(tbls.c.tbl_name, *_STATS_ORDER)
        )
        by_table: dict[str, list[Any]] = {}
        with self.events.reader() as conn:
            for row in conn.execute(query):
                by_table.setdefault(row.tbl_name, []).append(row)
        return {name: _groups(rows) for name, rows in by_table.items()}

    def aggregate(
        self,
        db_name: str,
        table_name: str,
        partition_names: Sequence[str],
        col_names: Sequence[str],
        *,
        engine: str | None = None,
    ) -> tuple[list[ColumnStat], int]:
        """Merged statistics over the partitions, and how many partitions had statistics for every column."""
        found = self.partition_stats(db_name, table_name, partition_names, col_names, engine=engine)
        merged: list[ColumnStat] = []
        counts: list[int] = []
        for col in (c.lower() for c in col_names):
            per_part = [s for stats in found.values() for s in stats if s.col_name == col]
            counts.append(len(per_part))
            if per_part:
                total = per_part[0]
                for stat in per_part[1:]:
                    total = merge_stats(total, stat)
                merged.append(total)
        return merged, min(counts) if counts else 0

    # -- internals --------------------------------------------------------------------------------------
    def _target(
        self, conn: Connection, db_name: str, table_name: str, partition_name: str | None
    ) -> tuple[int, int | None, dict[str, str]]:
        tbl_id, table = self.catalog.core.load_table(conn, db_name, table_name)
        columns = {c.name.lower(): c.type for c in table.sd.cols}
        if not partition_name:
            return tbl_id, None, columns
        if not table.partition_keys:
            raise InvalidObjectError(
                f"table '{db_name}.{table_name}' is not partitioned; send table statistics (isTblLevel) instead"
            )
        part_id = conn.execute(
            select(partitions.c.part_id).where(
                partitions.c.tbl_id == tbl_id, partitions.c.part_name == partition_name
            )
        ).scalar()
        if part_id is None:
            raise NoSuchPartitionError(db_name, table_name, partition_name)
        return tbl_id, part_id, columns


def _type_key(type_name: str) -> str:
    return "".join((type_name or "").lower().split())


def _key(tbl_id: int, part_id: int | None, col_name: str, engine: str) -> list[Any]:
    c = column_stats.c
    return [c.tbl_id == tbl_id, c.part_key == (part_id or 0), c.col_name == col_name, c.engine == engine]


def _describe(db_name: str, table_name: str, partition_name: str | None) -> str:
    if partition_name:
        return f"partition '{partition_name}' of table '{db_name}.{table_name}'"
    return f"table '{db_name}.{table_name}'"


def _validated(
    stat: ColumnStat, columns: dict[str, str], db_name: str, table_name: str, partition_name: str | None
) -> ColumnStat:
    name = (stat.col_name or "").lower()
    if name not in columns:
        raise InvalidInputError(
            f"'{stat.col_name}' is not a column of {_describe(db_name, table_name, partition_name)} "
            f"(columns: {', '.join(columns) or 'none'}); send statistics for its columns only"
        )
    if stat.kind not in KINDS:
        raise InvalidObjectError(
            f"statistics of column '{name}' of {_describe(db_name, table_name, partition_name)} set no "
            "ColumnStatisticsData member; set exactly one (longStats, stringStats, ...)"
        )
    return ColumnStat(name, (stat.col_type or columns[name]).lower(), stat.kind, stat.data)


# -- merging (Hive's ColumnStatsMerger rules, without bit vectors) ------------------------------------------
def _pick(a: Any, b: Any, choose: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return choose(a, b)


def _decimal_value(d: dict[str, Any] | None) -> Decimal | None:
    if d is None:
        return None
    unscaled = int.from_bytes(base64.b64decode(d["unscaled"]), "big", signed=True)
    return Decimal(unscaled).scaleb(-int(d["scale"]))


def _nested(key: str) -> Any:
    """min/max for Date/Timestamp/Decimal wrappers, compared by their value."""

    def value(d: dict[str, Any] | None) -> Any:
        if d is None:
            return None
        return _decimal_value(d) if key == "decimal" else d[key]

    def lower(a: Any, b: Any) -> Any:
        return a if value(a) <= value(b) else b

    def higher(a: Any, b: Any) -> Any:
        return a if value(a) >= value(b) else b

    return lower, higher


_WRAPPED = {
    "decimalStats": _nested("decimal"),
    "dateStats": _nested("daysSinceEpoch"),
    "timestampStats": _nested("secondsSinceEpoch"),
}


def merge_stats(a: ColumnStat, b: ColumnStat) -> ColumnStat:
    """The statistics of the union of the rows ``a`` and ``b`` describe (same column, same kind)."""
    if a.kind != b.kind:
        raise InvalidObjectError(
            f"statistics of column '{a.col_name}' are {a.kind} in one place and {b.kind} in another; "
            "they cannot be merged (the column's type changed): recompute them"
        )
    x, y = a.data, b.data
    out: dict[str, Any] = {}
    for name in ("numNulls", "numTrues", "numFalses"):
        if name in x or name in y:
            out[name] = (x.get(name) or 0) + (y.get(name) or 0)
    for name in ("numDVs", "maxColLen", "avgColLen"):
        if name in x or name in y:
            out[name] = _pick(x.get(name), y.get(name), max)
    lower, higher = _WRAPPED.get(a.kind, (min, max))
    if "lowValue" in x or "lowValue" in y:
        out["lowValue"] = _pick(x.get("lowValue"), y.get("lowValue"), lower)
    if "highValue" in x or "highValue" in y:
        out["highValue"] = _pick(x.get("highValue"), y.get("highValue"), higher)
    return ColumnStat(a.col_name, a.col_type, a.kind, out)


_STATS_ROWS = select(
    column_stats.c.engine, column_stats.c.stats, column_stats.c.last_analyzed, partitions.c.part_name
).outerjoin(partitions, partitions.c.part_id == column_stats.c.part_id)
_STATS_ORDER = (column_stats.c.part_key, column_stats.c.engine, column_stats.c.col_name)


def _groups(rows: Iterable[Any]) -> list[dict[str, Any]]:
    """Statistics rows (in ``_STATS_ORDER``) as the dump's groups: one per partition, engine and analysis."""
    groups: dict[tuple[str | None, str, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row.part_name, row.engine, row.last_analyzed), []).append(json.loads(row.stats))
    return [
        {"partition": part, "engine": engine, "last_analyzed": analyzed, "stats": stats}
        for (part, engine, analyzed), stats in groups.items()
    ]
