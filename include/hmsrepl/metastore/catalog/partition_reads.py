"""Reads of partitions: by name, by partial spec, by filter, and as stored documents for the cache."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, select

from hmsrepl.exceptions import InvalidObjectError, NoSuchPartitionError
from hmsrepl.metastore.catalog.core import CatalogFamily
from hmsrepl.metastore.catalog.rows import Decode, _chunks, _decoded, _partition_name
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.partition_filter import apply_filter, parse_filter, statement_time_limit
from hmsrepl.metastore.schema import partition_key_vals, partitions


class PartitionReads(CatalogFamily):
    """Partition reads every other family and the Thrift read path share."""

    def get_partition(self, db_name: str, table_name: str, values: Sequence[str]) -> Partition:
        return self.partition_of(self.core.get_table(db_name, table_name), values)

    def partition_of(self, table: Table, values: Sequence[str]) -> Partition:
        """A partition of a table the caller read already (its row only)."""
        name = _partition_name(table, values)
        found: list[Partition] = self.get_partitions_by_names(table.db_name, table.table_name, [name])
        if not found:
            raise NoSuchPartitionError(table.db_name, table.table_name, name)
        return found[0]

    def get_partitions_by_names(
        self, db_name: str, table_name: str, names: Sequence[str], *, decode: Decode = None
    ) -> list[Any]:
        with self.events.reader() as conn:
            tbl_id, _ = self.core.load_table(conn, db_name.lower(), table_name.lower())
            return self._partitions_named(conn, tbl_id, names, decode)

    def partitions_of(self, table: Table, names: Sequence[str]) -> list[Partition]:
        """``get_partitions_by_names`` of a table the caller just read (by its id: the table is not read
        again; a replication load asks this for every group of partitions it applies)."""
        if table.id is None:
            return self.get_partitions_by_names(table.db_name, table.table_name, names)
        with self.events.reader() as conn:
            return self._partitions_named(conn, table.id, names, None)

    @staticmethod
    def _partitions_named(conn: Connection, tbl_id: int, names: Sequence[str], decode: Decode) -> list[Any]:
        out: list[Any] = []
        for chunk in _chunks(list(names)):
            rows = conn.execute(
                select(partitions.c.doc, partitions.c.write_id)
                .where(partitions.c.tbl_id == tbl_id, partitions.c.part_name.in_(chunk))
                .order_by(partitions.c.part_name)
            )
            out.extend(_decoded(rows, decode))
        return out

    def get_partitions(
        self, db_name: str, table_name: str, max_parts: int = -1, *, decode: Decode = None
    ) -> list[Any]:
        with self.events.reader() as conn:
            tbl_id, _ = self.core.load_table(conn, db_name.lower(), table_name.lower())
            query = (
                select(partitions.c.doc, partitions.c.write_id)
                .where(partitions.c.tbl_id == tbl_id)
                .order_by(partitions.c.part_name)
            )
            if max_parts >= 0:
                query = query.limit(max_parts)
            return _decoded(conn.execute(query), decode)

    def get_partition_names(self, db_name: str, table_name: str, max_parts: int = -1) -> list[str]:
        with self.events.reader() as conn:
            tbl_id, _ = self.core.load_table(conn, db_name.lower(), table_name.lower())
            query = (
                select(partitions.c.part_name)
                .where(partitions.c.tbl_id == tbl_id)
                .order_by(partitions.c.part_name)
            )
            if max_parts >= 0:
                query = query.limit(max_parts)
            return list(conn.execute(query).scalars())

    def get_partitions_ps(
        self,
        db_name: str,
        table_name: str,
        partial_values: Sequence[str],
        max_parts: int = -1,
        *,
        decode: Decode = None,
    ) -> list[Any]:
        """Partitions matching a partial spec: an empty value matches anything (Hive's get_partitions_ps)."""
        table = self.core.get_table(db_name, table_name)
        if len(partial_values) > len(table.partition_keys):
            raise InvalidObjectError(
                f"partial spec {list(partial_values)} has more values than table '{table.qualified_name}' has keys"
            )
        with self.events.reader() as conn:
            query = select(partitions.c.doc, partitions.c.write_id).where(partitions.c.tbl_id == table.id)
            for idx, value in enumerate(partial_values):
                if value == "":
                    continue
                kv = partition_key_vals.alias(f"kv{idx}")
                query = query.join(
                    kv, and_(kv.c.part_id == partitions.c.part_id, kv.c.idx == idx, kv.c.value == value)
                )
            query = query.order_by(partitions.c.part_name)
            if max_parts >= 0:
                query = query.limit(max_parts)
            return _decoded(conn.execute(query), decode)

    def get_partitions_by_filter(
        self, db_name: str, table_name: str, filter_text: str, max_parts: int = -1, *, decode: Decode = None
    ) -> list[Any]:
        """Partitions matching a Hive filter expression, evaluated by the database (see partition_filter)."""
        table = self.core.get_table(db_name, table_name)
        node = parse_filter(filter_text) if filter_text.strip() else None
        with (
            self.events.reader() as conn,
            statement_time_limit(conn, f"partition filter on '{table.qualified_name}'"),
        ):
            query = select(partitions.c.doc, partitions.c.write_id).where(partitions.c.tbl_id == table.id)
            if node is not None:
                query = apply_filter(query, node, table)
            query = query.order_by(partitions.c.part_name)
            if max_parts >= 0:
                query = query.limit(max_parts)
            return _decoded(conn.execute(query), decode)

    def get_partition_docs(self, db_name: str, table_name: str) -> list[tuple[str, str, int]]:
        """Every partition of a table as stored: (name, JSON document, write id), ordered by name.

        The metadata cache loads whole tables; raw documents let it parse them once, after the read (which
        keeps its consistency window short), and size them without serialising again. Rows are streamed,
        so a 100,000-partition table does not sit in the driver's buffer twice.
        """
        with self.events.reader() as conn:
            tbl_id, _ = self.core.load_table(conn, db_name.lower(), table_name.lower())
            query = (
                select(partitions.c.part_name, partitions.c.doc, partitions.c.write_id)
                .where(partitions.c.tbl_id == tbl_id)
                .order_by(partitions.c.part_name)
                .execution_options(yield_per=5_000)
            )
            out: list[tuple[str, str, int]] = []
            for rows in conn.execute(query).partitions():
                out.extend((row.part_name, row.doc, row.write_id) for row in rows)
            return out
