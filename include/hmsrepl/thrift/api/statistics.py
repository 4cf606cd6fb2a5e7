"""Column statistics over Thrift."""

from __future__ import annotations

from typing import Any

from hmsrepl.cache.visibility import check_visible
from hmsrepl.exceptions import InvalidObjectError, NoSuchObjectError, WriteNotVisibleError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.thrift.api.base import Area, _write_ids
from hmsrepl.thrift.idl import hms
from hmsrepl.thrift.statistics import stat_from_thrift, stat_to_thrift


class StatisticsApi(Area):
    """Table and partition column statistics: update, read, aggregate and delete."""

    def update_table_column_statistics(self, stats_obj: Any) -> bool:
        return self._update_statistics(stats_obj, partitioned=False)

    def update_partition_column_statistics(self, stats_obj: Any) -> bool:
        return self._update_statistics(stats_obj, partitioned=True)

    def _update_statistics(self, stats_obj: Any, *, partitioned: bool, merge: bool = False) -> bool:
        desc = stats_obj.statsDesc
        if desc is None or not desc.dbName or not desc.tableName:
            raise InvalidObjectError("column statistics without statsDesc.dbName/tableName; name the table")
        if partitioned and not desc.partName:
            raise InvalidObjectError(
                f"partition statistics of '{desc.dbName}.{desc.tableName}' without statsDesc.partName; "
                "name the partition (e.g. ds=2024-01-01)"
            )
        stats = [stat_from_thrift(obj) for obj in stats_obj.statsObj or []]
        partition = desc.partName if partitioned else None
        with self.store.events.transaction():  # Spark's parameters follow in the same commit
            self.store.stats.update(
                desc.dbName,
                desc.tableName,
                stats,
                partition_name=partition,
                engine=stats_obj.engine,
                last_analyzed=desc.lastAnalyzed,
                merge=merge,
            )
            self.store.spark_stats.follow_stats(
                desc.dbName, desc.tableName, partition, [s.col_name for s in stats], stats_obj.engine
            )
        return True

    def get_table_column_statistics(self, db_name: str, tbl_name: str, col_name: str) -> Any:
        found = self.store.stats.table_stats(db_name, tbl_name, [col_name])
        if not found:
            raise NoSuchObjectError(f"column '{col_name}' of table '{db_name}.{tbl_name}' has no statistics")
        desc = hms.ColumnStatisticsDesc(isTblLevel=True, dbName=db_name.lower(), tableName=tbl_name.lower())
        return hms.ColumnStatistics(statsDesc=desc, statsObj=[stat_to_thrift(s) for s in found])

    def get_partition_column_statistics(
        self, db_name: str, tbl_name: str, part_name: str, col_name: str
    ) -> Any:
        found = self.store.stats.partition_stats(db_name, tbl_name, [part_name], [col_name]).get(part_name)
        if not found:
            raise NoSuchObjectError(
                f"column '{col_name}' of partition '{part_name}' of table '{db_name}.{tbl_name}' has no statistics"
            )
        desc = hms.ColumnStatisticsDesc(
            isTblLevel=False, dbName=db_name.lower(), tableName=tbl_name.lower(), partName=part_name
        )
        return hms.ColumnStatistics(statsDesc=desc, statsObj=[stat_to_thrift(s) for s in found])

    # With the reader's ValidWriteIdList, statistics are answered only when the state they describe is one
    # the reader may see (Hive's ``isCurrentStatsValidForTheQuery``): otherwise they are left out and the
    # result says ``isStatsCompliant`` false, as Hive's metastore answers; without a list, as they are.
    def get_table_statistics_req(self, request: Any) -> Any:
        compliant = self._compliant(request.dbName, request.tblName, request.validWriteIdList)
        if compliant is False:
            return hms.TableStatsResult(tableStats=[], isStatsCompliant=False)
        found = self.store.stats.table_stats(
            request.dbName, request.tblName, request.colNames or [], engine=request.engine
        )
        return hms.TableStatsResult(tableStats=[stat_to_thrift(s) for s in found], isStatsCompliant=compliant)

    def get_partitions_statistics_req(self, request: Any) -> Any:
        names = request.partNames or []
        withheld = self._withheld(request.dbName, request.tblName, request.validWriteIdList, names)
        found = self.store.stats.partition_stats(
            request.dbName,
            request.tblName,
            [name for name in names if name not in withheld],
            request.colNames or [],
            engine=request.engine,
        )
        return hms.PartitionsStatsResult(
            partStats={part: [stat_to_thrift(s) for s in stats] for part, stats in found.items() if part},
            isStatsCompliant=None if request.validWriteIdList is None else not withheld,
        )

    def get_aggr_stats_for(self, request: Any) -> Any:
        names = request.partNames or []
        if self._withheld(request.dbName, request.tblName, request.validWriteIdList, names):
            return hms.AggrStats(colStats=[], partsFound=0, isStatsCompliant=False)
        merged, found = self.store.stats.aggregate(
            request.dbName,
            request.tblName,
            names,
            request.colNames or [],
            engine=request.engine,
        )
        compliant = None if request.validWriteIdList is None else True
        return hms.AggrStats(
            colStats=[stat_to_thrift(s) for s in merged], partsFound=found, isStatsCompliant=compliant
        )

    def _compliant(self, db_name: str, tbl_name: str, valid_write_id_list: str | None) -> bool | None:
        """Whether the table's state is one the reader's list may see (None: the request has no list)."""
        write_ids = _write_ids(valid_write_id_list)
        if write_ids is None:
            return None
        table = self.catalog.get_table(db_name, tbl_name)
        try:
            check_visible(self.catalog.events, "statistics", (db_name, tbl_name), table, write_ids)
        except WriteNotVisibleError:
            return False
        return True

    def _withheld(
        self, db_name: str, tbl_name: str, valid_write_id_list: str | None, part_names: list[str]
    ) -> set[str]:
        """The named partitions whose state the reader's list may not see (none without a list)."""
        write_ids = _write_ids(valid_write_id_list)
        if write_ids is None or not part_names:
            return set()
        keys = self.catalog.get_table(db_name, tbl_name).partition_key_names
        out = set()
        for part in self.catalog.get_partitions_by_names(db_name, tbl_name, part_names):
            try:
                check_visible(self.catalog.events, "statistics", (db_name, tbl_name), part, write_ids)
            except WriteNotVisibleError:
                out.add(make_partition_name(keys, part.values))
        return out

    def set_aggr_stats_for(self, request: Any) -> bool:
        """Several tables' or partitions' statistics at once (Hive's SetPartitionsStatsRequest), in one commit."""
        with self.store.events.transaction():
            for stats in request.colStats or []:
                if request.engine and not stats.engine:
                    stats.engine = request.engine
                partitioned = stats.statsDesc is not None and not stats.statsDesc.isTblLevel
                self._update_statistics(stats, partitioned=partitioned, merge=bool(request.needMerge))
        return True

    def delete_table_column_statistics(
        self, db_name: str, tbl_name: str, col_name: str | None, engine: str | None = None
    ) -> bool:
        with self.store.events.transaction():
            self.store.stats.delete(db_name, tbl_name, col_name or None, engine=engine)
            self.store.spark_stats.follow_stats(
                db_name, tbl_name, None, [col_name] if col_name else None, engine
            )
        return True

    def delete_partition_column_statistics(
        self, db_name: str, tbl_name: str, part_name: str, col_name: str | None, engine: str | None = None
    ) -> bool:
        if not part_name:
            raise InvalidObjectError(
                f"delete_partition_column_statistics of '{db_name}.{tbl_name}' needs part_name"
            )
        with self.store.events.transaction():
            self.store.stats.delete(
                db_name, tbl_name, col_name or None, partition_name=part_name, engine=engine
            )
            columns = [col_name] if col_name else None
            self.store.spark_stats.follow_stats(db_name, tbl_name, part_name, columns, engine)
        return True
