"""What a bootstrap dump holds, counted as it is written: tables, partitions, files and bytes.

The dump's result (and its metrics) report these. Counting them afterwards meant reading every partition
page back and parsing each partition again: a sixth of a 100,000-partition dump's time. Every table entry
is written whole (its first page replaces what the dump held of it) or removed, so a count per table, reset
on each rewrite, is the dump's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from hmsrepl.metastore.payloads import referenced_bytes
from hmsrepl.metastore.recorded_pages import RecordedPages
from hmsrepl.replication.layout import DumpListing

#: A partition as the dump writes it: name, snapshot, encoded files (None: metadata only).
WrittenPartition: TypeAlias = tuple[str, dict[str, Any], DumpListing | None]


@dataclass
class _TableCount:
    partitions: int = 0
    files: int = 0
    bytes: int = 0

    def add_files(self, files: DumpListing | None) -> None:
        """Count a listing once it is written (a walked one, ``RecordedPages``, as its walk found it)."""
        if isinstance(files, RecordedPages):
            self.files += files.written
            self.bytes += files.written_bytes
        elif files:
            self.files += len(files)
            self.bytes += referenced_bytes(files)


class DumpTally:
    """Counts of one dump's table entries, kept by the code that writes them."""

    def __init__(self) -> None:
        self._tables: dict[str, _TableCount] = {}

    def table(self, name: str, files: DumpListing | None) -> None:
        """The table's entry is (re)written from its first page: its count starts again (called once the
        entry is written)."""
        count = self._tables[name] = _TableCount()
        count.add_files(files)

    def partitions(self, name: str, parts: Iterable[WrittenPartition]) -> Iterator[WrittenPartition]:
        """``parts`` unchanged, each counted for table ``name`` as it passes to the writer (a writer of a range
        of a table's partitions counts them without the table's entry)."""
        count = self._tables.setdefault(name, _TableCount())
        for part in parts:
            count.partitions += 1
            yield part
            count.add_files(part[2])  # once written: a walked listing is counted by its walk

    def merge(self, other: DumpTally) -> None:
        """Add the counts another writer of the same dump made (a worker process's share: whole tables, or a
        range of one table's partitions whose entry this writer holds)."""
        for name, count in other._tables.items():
            mine = self._tables.setdefault(name, _TableCount())
            mine.partitions += count.partitions
            mine.files += count.files
            mine.bytes += count.bytes

    def removed(self, name: str) -> None:
        self._tables.pop(name, None)

    def totals(self) -> tuple[int, int, int, int]:
        """(tables, partitions, files, bytes) of the entries the dump holds now."""
        counts = self._tables.values()
        return (
            len(self._tables),
            sum(c.partitions for c in counts),
            sum(c.files for c in counts),
            sum(c.bytes for c in counts),
        )
