"""Partition list reads in keyset pages of one database snapshot, so a reply of any size is built a page at a
time.

Reading 200,000 partitions whole held every row, then every decoded struct, at once (three concurrent
``get_partitions_by_names`` of 100,000 names took 1.74 GB). Here a read that finds more than ``page_rows``
partitions answers its count and its first page, and reads the next pages (``part_name > last``, in the same
order) only as the caller asks for them, on the same connection and snapshot: the count stays true for the
pages. Each page's decoding is charged to a memory account (``Charges``) before it is decoded and given back
when the caller asks for the next page. A read that finds at most ``page_rows`` answers a plain list, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any, Protocol

from sqlalchemy import Connection, Select, func, select

from hmsrepl.metastore.schema import partitions

#: Partitions per page: ~1 MB of documents, a few MB once decoded.
PAGE_ROWS = 1000
#: Memory of one decoded partition per byte of its stored document (4.5 measured for Thrift structs whose
#: columns are shared between the page's partitions; pydantic models cost more per byte, hence the margin),
#: plus a fixed cost per row.
BYTES_PER_DOC_BYTE = 6
BYTES_PER_ROW = 512
#: Charged per row before rows are read (their documents' size is known only then): 2 kB, a typical partition.
GUESS_PER_ROW = 2048

Rows = Sequence[Any]
#: What a read opens: its connection (entering any context it needs into the stack) and its query, which
#: selects ``doc`` and ``write_id`` of the partitions in ``part_name`` order, without a limit.
Build = Callable[[ExitStack], tuple[Connection, Select[Any]]]


class Charges(Protocol):
    """A memory account: ``charge`` holds bytes before work (and may refuse), ``give_back`` returns them."""

    def charge(self, size: int, *, committed: bool = False) -> int: ...

    def give_back(self, size: int) -> None: ...


class PagedReadChanged(RuntimeError):
    """The pages did not add up to the count answered first (the snapshot was not kept): the reply is void."""


def page_cost(rows: Rows) -> int:
    """The memory estimated to decode ``rows`` (charged before they are decoded)."""
    return sum(len(row.doc) for row in rows) * BYTES_PER_DOC_BYTE + BYTES_PER_ROW * len(rows)


class PartitionPages(Sequence[Any]):
    """A partition list of ``len()`` items read a page at a time (``pages``, once).

    In-process callers may use it as a sequence: the first other use reads the rest into a list."""

    def __init__(self, count: int, first: list[Any], rest: Iterator[list[Any]]) -> None:
        self.total = count
        self._first: list[Any] | None = first
        self._rest = rest
        self._all: list[Any] | None = None

    def __len__(self) -> int:
        return self.total

    def pages(self) -> Iterator[list[Any]]:
        """The partitions page by page; each page is let go when the next is asked for."""
        if self._all is not None:
            yield self._all
            return
        first, self._first = self._first, None
        if first is None:
            raise RuntimeError("the pages of a partition read were already taken")
        sent = len(first)
        yield first
        del first
        for page in self._rest:
            sent += len(page)
            yield page
            del page  # not held while the next one is read
        if sent != self.total:
            raise PagedReadChanged(f"a paged partition read answered {sent} of the {self.total} counted")

    def close(self) -> None:
        """Give back the connection and the memory still held (when the pages were not all read)."""
        close = getattr(self._rest, "close", None)
        if close is not None:
            close()

    def _materialized(self) -> list[Any]:
        if self._all is None:
            self._all = [item for page in self.pages() for item in page]
        return self._all

    def __iter__(self) -> Iterator[Any]:
        return iter(self._materialized())

    def __getitem__(self, index: Any) -> Any:
        return self._materialized()[index]

    def __eq__(self, other: object) -> bool:
        return self._materialized() == (list(other) if isinstance(other, PartitionPages | list) else other)

    __hash__ = None  # type: ignore[assignment]


def read_pages(
    build: Build,
    decode: Callable[[Rows], list[Any]],
    *,
    max_parts: int,
    page_rows: int,
    charges: Charges | None,
) -> list[Any] | PartitionPages:
    """Partitions of ``build``'s query, at most ``max_parts`` (-1: all): a list when they fit one page,
    else ``PartitionPages`` reading the rest of the same snapshot on demand."""
    held = _Held(charges)
    with ExitStack() as stack:
        conn, query = build(stack)
        query = query.add_columns(partitions.c.part_name)
        if 0 <= max_parts <= page_rows:
            held.set(GUESS_PER_ROW * max_parts)  # before the rows are read; set to their cost once read
            return held.decode(conn.execute(query.limit(max_parts)).all(), decode)
        held.set(GUESS_PER_ROW * (page_rows + 1))
        rows = conn.execute(query.limit(page_rows + 1)).all()
        if len(rows) <= page_rows:
            return held.decode(rows, decode)
        count = conn.execute(select(func.count()).select_from(query.order_by(None).subquery())).scalar_one()
        if max_parts >= 0:
            count = min(count, max_parts)

        def pages(first: Rows) -> Iterator[Rows]:
            yield first
            last, left = first[-1].part_name, count - len(first)
            del first
            while left > 0:
                rows = conn.execute(
                    query.where(partitions.c.part_name > last).limit(min(page_rows, left))
                ).all()
                if not rows:
                    return
                last, left = rows[-1].part_name, left - len(rows)
                yield rows

        first = rows[:page_rows]
        del rows
        return _paged(count, pages(first), stack.pop_all(), decode, held)


def read_named_pages(
    build: Callable[[ExitStack], tuple[Connection, Select[Any], dict[str, Any]]],
    names: Sequence[str],
    decode: Callable[[Rows], list[Any]],
    *,
    chunk: int,
    page_rows: int,
    charges: Charges | None,
) -> list[Any] | PartitionPages:
    """Partitions by name, ``chunk`` names per query (each chunk's finds in ``part_name`` order, chunks in the
    order of ``names``): a list for at most ``page_rows`` names, else counted first and read a page of
    chunks at a time. ``build`` opens the connection and gives the statement, which takes the chunk's names
    as its list parameter ``names``, with its other parameters."""
    chunks = [names[start : start + chunk] for start in range(0, len(names), chunk)]
    held = _Held(charges)
    with ExitStack() as stack:
        conn, statement, given = build(stack)

        def chunk_rows(part: Sequence[str]) -> Rows:
            return conn.execute(statement, {**given, "names": list(part)}).all()

        if len(names) <= page_rows:
            held.set(GUESS_PER_ROW * len(names))
            rows = [row for part in chunks for row in chunk_rows(part)]
            return held.decode(rows, decode)
        counted = select(func.count()).select_from(statement.subquery())
        count = sum(conn.execute(counted, {**given, "names": list(part)}).scalar_one() for part in chunks)
        per_page = max(1, page_rows // chunk)
        held.set(GUESS_PER_ROW * per_page * chunk)

        def pages() -> Iterator[Rows]:
            for start in range(0, len(chunks), per_page):
                rows = [row for part in chunks[start : start + per_page] for row in chunk_rows(part)]
                if rows:
                    yield rows

        return _paged(count, pages(), stack.pop_all(), decode, held)


class _Held:
    """What a read holds of a memory account: set to an estimate before rows are read, to their cost once
    read (charging more, or giving back), and kept while their decoded page lives."""

    def __init__(self, charges: Charges | None) -> None:
        self.charges = charges
        self.size = 0
        #: Set once the first page was handed over: the reply has begun, and later pages cannot be refused.
        self.committed = False

    def set(self, size: int) -> None:
        if self.charges is None:
            return
        if size > self.size:
            self.size += self.charges.charge(size - self.size, committed=self.committed)
        elif size < self.size:
            self.charges.give_back(self.size - size)
            self.size = size

    def decode(self, rows: Rows, decode: Callable[[Rows], list[Any]]) -> list[Any]:
        """``rows`` decoded, their cost held (until the call ends: the list lives until its reply is written)."""
        self.set(page_cost(rows))
        return decode(rows)


def _paged(
    count: int,
    row_pages: Iterator[Rows],
    owned: ExitStack,
    decode: Callable[[Rows], list[Any]],
    held: _Held,
) -> PartitionPages:
    """``row_pages`` decoded one at a time. Each page's cost is charged before it is decoded and stays held
    after the caller is done with it, as the estimate for the next page's rows (set to their cost once
    read); ``owned`` (the connection) closed and everything given back when the pages end or are abandoned."""

    def decoded() -> Iterator[list[Any]]:
        try:
            for rows in row_pages:
                page = held.decode(rows, decode)
                del rows
                yield page
                del page  # the caller is done with it before asking for the next
        finally:
            held.set(0)
            owned.close()

    generator = decoded()
    try:
        first = next(generator, [])  # started: closing it (or losing it) now runs its ``finally``
    except BaseException:
        held.set(0)
        owned.close()
        raise
    held.committed = True  # the next pages are read while the reply is being written
    return PartitionPages(count, first, generator)


__all__ = [
    "PAGE_ROWS",
    "Charges",
    "PagedReadChanged",
    "PartitionPages",
    "page_cost",
    "read_named_pages",
    "read_pages",
]
