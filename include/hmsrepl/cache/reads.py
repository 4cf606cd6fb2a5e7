"""Catalog reads answered from the metadata cache when it may, and from the database otherwise.

Both paths return the same objects in the same order and raise the same errors, so callers (the Thrift
handler, in-process users) need not know which one answered. ``to`` converts each object for the caller
(e.g. to its Thrift struct); on a hit the conversion is done once per cached object and kept, and ``keep``
may name a richer conversion for that (the Thrift handler keeps each partition's wire encoding with it).
On the database path, ``decode`` (when given) builds each partition straight from its stored document in
place of ``to`` (the Thrift handler's structs without the model in between).
Works without a cache too: then every read goes to the database. With a cache, every database answer is
placed in the log (``MetadataCache.note_database_answer``), so the cache never answers older afterwards.

A reader passing a ValidWriteIdList gets from the database only objects whose state it may see (see
``visibility``): the database holds changes of open and aborted txns, which no cache hit shows either, so
such a read is refused with the retryable ``WriteNotVisibleError`` naming the write id, and not noted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from hmsrepl.cache.entries import CachedObject, TableState
from hmsrepl.cache.filters import compile_filter
from hmsrepl.cache.service import MetadataCache, database_key
from hmsrepl.cache.visibility import check_visible
from hmsrepl.exceptions import WriteNotVisibleError
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.catalog import CatalogService, Decode
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.partition_pages import Charges

T = TypeVar("T")
Convert = Callable[[Any], Any] | None


def _limit(items: Sequence[T], max_parts: int) -> Sequence[T]:
    return items if max_parts < 0 else items[:max_parts]


class CachedReads:
    def __init__(self, catalog: CatalogService, cache: MetadataCache | None = None) -> None:
        self.catalog = catalog
        self.cache = cache

    def _db(
        self,
        key: tuple[str, str],
        read: Callable[[], T],
        write_ids: ValidWriteIdList | None = None,
        shown: Callable[[T], Iterable[Table | Partition]] | None = None,
    ) -> T:
        """``read()`` from the database, noted as an answer for ``key`` (a "no such object" too).

        With a reader's list, the objects ``shown`` picks from the answer must be visible to it; a refused
        read answered nothing, so it is not noted.
        """
        if self.cache is None and write_ids is None:
            return read()
        answered = True
        try:
            found = read()
            if write_ids is not None:
                models: Iterable[Any] = shown(found) if shown is not None else (found,)
                for model in models:  # a Table or Partition: what ``shown`` picks, or the answer itself
                    check_visible(self.catalog.events, _describe(key, model), key, model, write_ids)
            return found
        except WriteNotVisibleError:
            answered = False
            raise
        finally:
            if self.cache is not None and answered:
                self.cache.note_database_answer((key[0].lower(), key[1].lower()))

    @staticmethod
    def _out(entry: CachedObject, to: Convert) -> Any:
        return entry.struct(to) if to is not None else entry.model

    @staticmethod
    def _conv(obj: Any, to: Convert) -> Any:
        return to(obj) if to is not None else obj

    def _select(
        self,
        db_name: str,
        table_name: str,
        write_ids: ValidWriteIdList | None,
        table_id: int | None,
        select: Callable[[TableState], T],
    ) -> tuple[bool, T | None]:
        if self.cache is None:
            return False, None
        answer = self.cache.partitions(db_name, table_name, write_ids, table_id, select)
        return answer.hit, answer.value

    # -- databases and tables -------------------------------------------------------------------------------
    def database(self, name: str, *, to: Convert = None) -> Any:
        if self.cache is not None:
            answer = self.cache.database(name)
            if answer.hit and answer.value is not None:
                return self._out(answer.value, to)
        return self._conv(self._db(database_key(name), lambda: self.catalog.get_database(name)), to)

    def table(
        self,
        db_name: str,
        table_name: str,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
        *,
        to: Convert = None,
    ) -> Any:
        if self.cache is not None:
            answer = self.cache.table(db_name, table_name, write_ids, table_id)
            if answer.hit and answer.value is not None:
                return self._out(answer.value, to)
        return self._conv(
            self._db((db_name, table_name), lambda: self.catalog.get_table(db_name, table_name), write_ids),
            to,
        )

    def tables(
        self, db_name: str, table_names: Sequence[str], *, to: Convert = None, charges: Charges | None = None
    ) -> list[Any]:
        """Tables by name, from the database (one query per chunk); each one noted as answered."""
        found = self._db(
            (db_name, ""), lambda: self.catalog.get_table_objects(db_name, table_names, charges=charges)
        )
        if self.cache is not None:
            for table in found:
                self.cache.note_database_answer((table.db_name, table.table_name))
        return [self._conv(t, to) for t in found]

    # -- partitions -----------------------------------------------------------------------------------------
    def partitions(
        self,
        db_name: str,
        table_name: str,
        max_parts: int = -1,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
        *,
        to: Convert = None,
        keep: Convert = None,
        decode: Decode = None,
        page_rows: int = 0,
        charges: Charges | None = None,
    ) -> Sequence[Any]:
        hit, found = self._select(
            db_name, table_name, write_ids, table_id, lambda s: _limit(s.ordered_partitions(), max_parts)
        )
        if hit:
            return [self._out(entry, keep or to) for _, entry in found or ()]
        decode = _models_for(write_ids, decode)
        parts = self._db(
            (db_name, table_name),
            lambda: self.catalog.get_partitions(
                db_name, table_name, max_parts, decode=decode, **_paging(decode, page_rows, charges)
            ),
            write_ids,
            list,
        )
        return parts if decode is not None else [self._conv(p, to) for p in parts]

    def partition(
        self,
        db_name: str,
        table_name: str,
        values: Sequence[str],
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
        *,
        to: Convert = None,
        keep: Convert = None,
    ) -> Any:
        hit, found = self._select(db_name, table_name, write_ids, table_id, lambda s: s.partition(values))
        if hit and found is not None:
            return self._out(found, keep or to)
        part = self._db(
            (db_name, table_name), lambda: self.catalog.get_partition(db_name, table_name, values), write_ids
        )
        return self._conv(part, to)

    def partitions_by_names(
        self,
        db_name: str,
        table_name: str,
        names: Sequence[str],
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
        *,
        to: Convert = None,
        keep: Convert = None,
        decode: Decode = None,
        page_rows: int = 0,
        charges: Charges | None = None,
    ) -> Sequence[Any]:
        hit, found = self._select(
            db_name, table_name, write_ids, table_id, lambda s: s.partitions_by_names(names)
        )
        if hit:
            return [self._out(entry, keep or to) for entry in found or ()]
        decode = _models_for(write_ids, decode)
        parts = self._db(
            (db_name, table_name),
            lambda: self.catalog.get_partitions_by_names(
                db_name, table_name, names, decode=decode, **_paging(decode, page_rows, charges)
            ),
            write_ids,
            list,
        )
        return parts if decode is not None else [self._conv(p, to) for p in parts]

    def partition_names(
        self,
        db_name: str,
        table_name: str,
        max_parts: int = -1,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
    ) -> list[str]:
        hit, found = self._select(
            db_name,
            table_name,
            write_ids,
            table_id,
            lambda s: [name for name, _ in _limit(s.ordered_partitions(), max_parts)],
        )
        if hit:
            return list(found or ())
        return self._db(
            (db_name, table_name), lambda: self.catalog.get_partition_names(db_name, table_name, max_parts)
        )

    def partitions_ps(
        self,
        db_name: str,
        table_name: str,
        partial_values: Sequence[str],
        max_parts: int = -1,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
        *,
        to: Convert = None,
        keep: Convert = None,
        decode: Decode = None,
        page_rows: int = 0,
        charges: Charges | None = None,
    ) -> Sequence[Any]:
        hit, found = self._select(
            db_name, table_name, write_ids, table_id, lambda s: s.matching(partial_values, max_parts)
        )
        if hit:
            return [self._out(entry, keep or to) for _, entry in found or ()]
        decode = _models_for(write_ids, decode)
        parts = self._db(
            (db_name, table_name),
            lambda: self.catalog.get_partitions_ps(
                db_name,
                table_name,
                partial_values,
                max_parts,
                decode=decode,
                **_paging(decode, page_rows, charges),
            ),
            write_ids,
            list,
        )
        return parts if decode is not None else [self._conv(p, to) for p in parts]

    def partition_names_ps(
        self,
        db_name: str,
        table_name: str,
        partial_values: Sequence[str],
        max_parts: int = -1,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
    ) -> list[str]:
        hit, found = self._select(
            db_name,
            table_name,
            write_ids,
            table_id,
            lambda s: [name for name, _ in s.matching(partial_values, max_parts)],
        )
        if hit:
            return list(found or ())

        return self._db(
            (db_name, table_name),
            lambda: self.catalog.get_partition_names_ps(db_name, table_name, partial_values, max_parts),
        )

    def partitions_by_filter(
        self,
        db_name: str,
        table_name: str,
        filter_text: str,
        max_parts: int = -1,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
        *,
        to: Convert = None,
        keep: Convert = None,
        decode: Decode = None,
        page_rows: int = 0,
        charges: Charges | None = None,
    ) -> Sequence[Any]:
        def select(state: TableState) -> list[CachedObject]:
            if max_parts == 0:
                return []
            if not filter_text.strip():
                return [entry for _, entry in _limit(state.ordered_partitions(), max_parts)]
            matches = compile_filter(filter_text, state.table_model)
            out = []
            for _, entry in state.ordered_partitions():
                if matches(entry.model.values):  # type: ignore[union-attr]
                    out.append(entry)
                    if len(out) == max_parts:
                        break
            return out

        hit, found = self._select(db_name, table_name, write_ids, table_id, select)
        if hit:
            return [self._out(entry, keep or to) for entry in found or ()]
        decode = _models_for(write_ids, decode)
        parts = self._db(
            (db_name, table_name),
            lambda: self.catalog.get_partitions_by_filter(
                db_name,
                table_name,
                filter_text,
                max_parts,
                decode=decode,
                **_paging(decode, page_rows, charges),
            ),
            write_ids,
            list,
        )
        return parts if decode is not None else [self._conv(p, to) for p in parts]


def _paging(decode: Decode, page_rows: int, charges: Charges | None) -> dict[str, Any]:
    """Pages (``partition_pages``) for decoded structs only: models are judged for visibility whole."""
    return {"page_rows": page_rows, "charges": charges} if decode is not None and page_rows else {}


def _models_for(write_ids: ValidWriteIdList | None, decode: Decode) -> Decode:
    """A reader's list needs the models (their write ids and stamps) to judge visibility: no decoder."""
    return None if write_ids is not None else decode


def _describe(key: tuple[str, str], model: Table | Partition) -> str:
    if isinstance(model, Partition):
        return f"partition {list(model.values)} of table '{key[0]}.{key[1]}'"
    return f"table '{key[0]}.{key[1]}'"
