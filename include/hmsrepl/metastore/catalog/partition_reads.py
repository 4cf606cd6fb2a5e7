"""Reads of partitions: by name, by partial spec, by filter, and as stored documents for the cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any, Literal, overload

from sqlalchemy import Connection, Select, and_, select

from hmsrepl.exceptions import InvalidObjectError, NoSuchPartitionError
from hmsrepl.metastore import database
from hmsrepl.metastore.catalog.core import CatalogFamily
from hmsrepl.metastore.catalog.held import created_without_partitions
from hmsrepl.metastore.catalog.rows import BATCH, Decode, _chunks, _decoded, _partition_name
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.partition_filter import (
    BoolOp,
    Comparison,
    apply_filter,
    parse_filter,
    statement_time_limit,
)
from hmsrepl.metastore.partition_pages import (
    Charges,
    PartitionPages,
    read_named_pages,
    read_pages,
)
from hmsrepl.metastore.partitions_named import ByBackend
from hmsrepl.metastore.schema import partition_key_vals, partitions


class PartitionReads(CatalogFamily):
    """Partition reads every other family and the Thrift read path share."""

    def get_partition(self, db_name: str, table_name: str, values: Sequence[str]) -> Partition:
        return self.partition_of(self.core.get_table(db_name, table_name), values)

    def partition_of(self, table: Table, values: Sequence[str]) -> Partition:
        """A partition of a table the caller read already (its row only)."""
        name = _partition_name(table, values)
        found: list[Partition] = self._by_names(table.db_name, table.table_name, [name], None)
        if not found:
            raise NoSuchPartitionError(table.db_name, table.table_name, name)
        return found[0]

    def get_partitions_by_names(
        self,
        db_name: str,
        table_name: str,
        names: Sequence[str],
        *,
        decode: Decode = None,
        page_rows: int = 0,
        charges: Charges | None = None,
    ) -> list[Any] | PartitionPages:
        """With ``page_rows``, more names than that are read a page at a time (``partition_pages``)."""
        if page_rows:

            def build(stack: ExitStack) -> tuple[Connection, Select[Any], dict[str, Any]]:
                conn = stack.enter_context(self.events.reader(snapshot=True))
                tbl_id = self.core.load_table(conn, db_name.lower(), table_name.lower())[0]
                return conn, _NAMED.for_(conn), {"tbl_id": tbl_id}

            return read_named_pages(
                build,
                list(names),
                lambda rows: _decoded(rows, decode),
                chunk=BATCH,
                page_rows=page_rows,
                charges=charges,
            )
        return self._by_names(db_name, table_name, names, decode)

    def _by_names(self, db_name: str, table_name: str, names: Sequence[str], decode: Decode) -> list[Any]:
        with self.events.reader() as conn:
            tbl_id, _ = self.core.load_table(conn, db_name.lower(), table_name.lower())
            return self._partitions_named(conn, tbl_id, names, decode)

    def partitions_of(self, table: Table, names: Sequence[str]) -> list[Partition]:
        """``get_partitions_by_names`` of a table the caller just read (by its id: the table is not read
        again; a replication load asks this for every group of partitions it applies). A table the open
        transaction created and has added nothing to has none: answered without a read (a round trip per
        table of a bootstrap on a server database)."""
        if table.id is None:
            return self._by_names(table.db_name, table.table_name, names, None)
        with self.events.reader() as conn:
            if created_without_partitions(self.events, conn, table.id):
                return []
            return self._partitions_named(conn, table.id, names, None)

    @staticmethod
    def _partitions_named(conn: Connection, tbl_id: int, names: Sequence[str], decode: Decode) -> list[Any]:
        out: list[Any] = []
        named = _NAMED.for_(conn)
        for chunk in _chunks(list(names)):
            out.extend(_decoded(conn.execute(named, {"tbl_id": tbl_id, "names": list(chunk)}), decode))
        return out

    @overload
    def get_partitions(
        self,
        db_name: str,
        table_name: str,
        max_parts: int = -1,
        *,
        decode: Decode = None,
        page_rows: Literal[0] = 0,
        charges: Charges | None = None,
    ) -> list[Any]: ...

    @overload
    def get_partitions(
        self,
        db_name: str,
        table_name: str,
        max_parts: int = -1,
        *,
        decode: Decode = None,
        page_rows: int,
        charges: Charges | None = None,
    ) -> list[Any] | PartitionPages: ...

    def get_partitions(
        self,
        db_name: str,
        table_name: str,
        max_parts: int = -1,
        *,
        decode: Decode = None,
        page_rows: int = 0,
        charges: Charges | None = None,
    ) -> list[Any] | PartitionPages:
        """With ``page_rows``, more partitions than that are read a page at a time (``partition_pages``)."""
        if page_rows:

            def build(stack: ExitStack) -> tuple[Connection, Select[Any]]:
                conn = stack.enter_context(self.events.reader(snapshot=True))
                tbl_id, _ = self.core.load_table(conn, db_name.lower(), table_name.lower())
                return conn, _table_query(tbl_id)

            return _paged_read(build, decode, max_parts, page_rows, charges)
        with self.events.reader() as conn:
            tbl_id, _ = self.core.load_table(conn, db_name.lower(), table_name.lower())
            query = _table_query(tbl_id)
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
        page_rows: int = 0,
        charges: Charges | None = None,
    ) -> list[Any] | PartitionPages:
        """Partitions matching a partial spec: an empty value matches anything (Hive's get_partitions_ps).
        With ``page_rows``, more partitions than that are read a page at a time (``partition_pages``)."""
        query = self._partial_spec_query(
            db_name, table_name, partial_values, partitions.c.doc, partitions.c.write_id
        )
        if page_rows:

            def build(stack: ExitStack) -> tuple[Connection, Select[Any]]:
                return stack.enter_context(self.events.reader(snapshot=True)), query

            return _paged_read(build, decode, max_parts, page_rows, charges)
        with self.events.reader() as conn:
            if max_parts >= 0:
                query = query.limit(max_parts)
            return _decoded(conn.execute(query), decode)

    def get_partition_names_ps(
        self, db_name: str, table_name: str, partial_values: Sequence[str], max_parts: int = -1
    ) -> list[str]:
        """Names of the partitions matching a partial spec (``get_partitions_ps``), read as names only."""
        query = self._partial_spec_query(db_name, table_name, partial_values, partitions.c.part_name)
        if max_parts >= 0:
            query = query.limit(max_parts)
        with self.events.reader() as conn:
            return list(conn.execute(query).scalars())

    def _partial_spec_query(
        self, db_name: str, table_name: str, partial_values: Sequence[str], *columns: Any
    ) -> Select[Any]:
        """``columns`` of the partitions matching a partial spec, in name order; an empty value matches any."""
        table = self.core.get_table(db_name, table_name)
        if len(partial_values) > len(table.partition_keys):
            raise InvalidObjectError(
                f"partial spec {list(partial_values)} has more values than table '{table.qualified_name}' has keys"
            )
        query = select(*columns).where(partitions.c.tbl_id == table.id)
        for idx, value in enumerate(partial_values):
            if value == "":
                continue
            kv = partition_key_vals.alias(f"kv{idx}")
            query = query.join(
                kv, and_(kv.c.part_id == partitions.c.part_id, kv.c.idx == idx, kv.c.value == value)
            )
        return query.order_by(partitions.c.part_name)

    def get_partitions_by_filter(
        self,
        db_name: str,
        table_name: str,
        filter_text: str,
        max_parts: int = -1,
        *,
        decode: Decode = None,
        page_rows: int = 0,
        charges: Charges | None = None,
    ) -> list[Any] | PartitionPages:
        """Partitions matching a Hive filter expression, evaluated by the database (see partition_filter).
        With ``page_rows``, more partitions than that are read a page at a time (``partition_pages``), each
        page's query under the statement time limit."""
        table = self.core.get_table(db_name, table_name)
        node = parse_filter(filter_text) if filter_text.strip() else None
        if page_rows:

            def build(stack: ExitStack) -> tuple[Connection, Select[Any]]:
                conn = stack.enter_context(self.events.reader(snapshot=True))
                stack.enter_context(
                    statement_time_limit(conn, f"partition filter on '{table.qualified_name}'")
                )
                return conn, _filter_query(table, node)

            return _paged_read(build, decode, max_parts, page_rows, charges)
        with (
            self.events.reader() as conn,
            statement_time_limit(conn, f"partition filter on '{table.qualified_name}'"),
        ):
            query = _filter_query(table, node)
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
            with database.in_transaction(conn):
                for rows in conn.execute(query).partitions():
                    out.extend((row.part_name, row.doc, row.write_id) for row in rows)
            return out


def _table_query(tbl_id: int) -> Select[Any]:
    """A table's partitions (document, write id) in name order."""
    return (
        select(partitions.c.doc, partitions.c.write_id)
        .where(partitions.c.tbl_id == tbl_id)
        .order_by(partitions.c.part_name)
    )


def _filter_query(table: Table, node: Comparison | BoolOp | None) -> Select[Any]:
    """A table's partitions matching a parsed Hive filter (all of them without one), in name order."""
    query = select(partitions.c.doc, partitions.c.write_id).where(partitions.c.tbl_id == table.id)
    if node is not None:
        query = apply_filter(query, node, table)
    return query.order_by(partitions.c.part_name)


# Built once, one shape per backend (``partitions_named``): a load reads the partitions it is about to
# change by name for every group of them.
_NAMED = ByBackend(
    lambda named: (
        select(named.rows.c.doc, named.rows.c.write_id)
        .select_from(named.source)
        .where(named.picked)
        .order_by(named.rows.c.part_name)
    )
)


def _paged_read(
    build: Callable[[ExitStack], tuple[Connection, Select[Any]]],
    decode: Decode,
    max_parts: int,
    page_rows: int,
    charges: Charges | None,
) -> list[Any] | PartitionPages:
    return read_pages(
        build, lambda rows: _decoded(rows, decode), max_parts=max_parts, page_rows=page_rows, charges=charges
    )
