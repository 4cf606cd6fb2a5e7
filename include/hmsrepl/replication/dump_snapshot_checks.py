"""The checks of one dumped object, whatever walk finds it: its name, its model, its locations, its files.

A bootstrap dump names each object once, in its tree; an incremental dump names objects inside its events'
messages, a table's snapshot in every partition event. Both walks (``dump_validation.DumpValidator``) hand
each snapshot here. What passed is remembered, bounded (a dump may hold millions of objects), so a table's
snapshot and its location are checked once however many events repeat them. Every refusal is one line naming
the dump, the object and what is wrong (``DumpValidationError``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from hmsrepl.formats.iceberg_tables import metadata_refusal
from hmsrepl.formats.json_text import dumps_sorted
from hmsrepl.formats.paths import InvalidPathError, canonical_uri, child_name, is_below, show
from hmsrepl.metastore.model import Database, Partition, Table
from hmsrepl.replication.dump_checks import (
    DumpValidationError,
    check_file_entry,
    check_name,
    check_partition_values,
)
from hmsrepl.replication.layout import DumpLimits
from hmsrepl.replication.source_roots import SOURCE_EXTERNAL_ROOTS_ENV, SourceRoots

if TYPE_CHECKING:
    from hmsrepl.replication.dump_validation import ValidationReport
    from hmsrepl.replication.locations import LocationMapper

LOCATIONS_REMEMBERED = 4096  # locations a validation remembers as checked (then starts over)
TABLES_REMEMBERED = 256  # distinct table snapshots a validation remembers as checked (then starts over)
FILES_PAGE = 10_000  # checked file entries a validation gathers before it gives them on (``file_pages``)


class CheckedTable(NamedTuple):
    """What the checks of a table snapshot found: its canonical location, its partition keys' names and whether
    it is managed, as the catalog decides it (``Table.is_managed``)."""

    location: str | None
    keys: list[str]
    managed: bool


@dataclass
class TargetPlace:
    """Where the load writes: the target warehouse and database location, and how locations map there."""

    warehouse: str
    db_location: str
    mapper: LocationMapper
    cmroot: str = ""

    def __post_init__(self) -> None:
        self.canonical_warehouse = canonical_uri(self.warehouse)
        self.canonical_db_location = canonical_uri(self.db_location) if self.db_location else ""
        self.canonical_cmroot = canonical_uri(self.cmroot) if self.cmroot else ""


class SnapshotChecks:
    """The checks of dumped objects for one validation, counted in its ``report``.

    ``place``: the target side, set by the walk once the source database location is known (None until then:
    locations are checked against the source roots only). ``file_pages``: given the checked file entries a
    page at a time (at most ``FILES_PAGE``), for the load's pre-flight."""

    def __init__(
        self,
        dump_uri: str,
        limits: DumpLimits,
        roots: SourceRoots,
        report: ValidationReport,
        file_pages: Callable[[list[str]], None] | None,
    ) -> None:
        self.dump_uri, self.limits, self.roots, self.report = dump_uri, limits, roots, report
        self.file_pages = file_pages
        self._files_page: list[str] = []  # checked entries not yet given to ``file_pages``
        self.place: TargetPlace | None = None
        # Locations that passed ``location``: events repeat their table's snapshot (every partition event of
        # a table names its location), and the check depends only on its arguments and the target place.
        # ``place`` is set once (None until the source database location is known): part of the key.
        # Each passed location's canonical form, so the caller does not parse it again.
        self._passed: dict[tuple[str, str, str | None, bool], str] = {}
        # Each table location's mapped canonical form (the directory its partitions must not map onto):
        # computed once per table, not once per partition; bounded like ``_tables_passed``.
        self._mapped_tables: dict[str, str] = {}
        # Table snapshots that passed ``table``, by content: every partition event repeats its table's.
        self._tables_passed: dict[tuple[bytes, bool], CheckedTable] = {}

    def fail(self, where: str, what: str) -> DumpValidationError:
        return DumpValidationError(f"dump '{self.dump_uri}' refused, nothing was applied: {where}: {what}")

    def name(self, kind: str, name: Any, where: str) -> str:
        try:
            return check_name(kind, name, self.limits.max_name_chars)
        except InvalidPathError as exc:
            raise self.fail(where, str(exc)) from None

    def model(self, model: Any, snapshot: dict[str, Any], where: str) -> Any:
        """The snapshot is what the load's model accepts (else it would fail half-way, in the target writer);
        returns the model it makes."""
        try:
            return model.model_validate(snapshot)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first.get("loc", ()))
            raise self.fail(
                where, f"malformed {model.__name__.lower()} snapshot: {path}: {first.get('msg')}"
            ) from None

    def database(self, database: dict[str, Any], where: str, *, own: bool) -> str:
        self.model(Database, database, where)
        self.name("database", database.get("name"), where)
        location = database.get("location_uri") or ""
        if location:
            self.location(location, where, kind="db")
        return location

    def table(self, table: dict[str, Any], where: str) -> CheckedTable:
        """A table snapshot's checks, made once per content and target place (``_check_table``)."""
        key = (dumps_sorted(table), self.place is not None)
        passed = self._tables_passed.get(key)
        if passed is None:
            passed = self.check_table(table, where)
            if len(self._tables_passed) >= TABLES_REMEMBERED:  # bounded: a dump may hold millions of tables
                self._tables_passed.clear()
            self._tables_passed[key] = passed
        self.report.objects += 1
        return passed

    def check_table(self, table: dict[str, Any], where: str) -> CheckedTable:
        name = self.name("table", table.get("table_name"), where)
        where = f"{where} table '{name}'"
        model: Table = self.model(Table, table, where)
        keys = table.get("partition_keys") or []
        if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
            raise self.fail(where, "partition_keys is not a list of columns")
        key_names = [self.name("partition key", k.get("name"), where) for k in keys]
        location = self.location_of(table, where)
        if location is not None:
            self.location(location, where, kind="table")
        params = table.get("parameters") or {}
        reason = metadata_refusal(name, params, location) if isinstance(params, dict) else None
        if reason:  # the load would read the metadata there and write its rewrite beside the copy
            raise self.fail(where, reason)
        return CheckedTable(canonical_uri(location) if location else None, key_names, model.is_managed)

    def partition(self, part: Any, keys: list[str], table_location: str | None, where: str) -> str | None:
        if not isinstance(part, dict):
            raise self.fail(where, "a partition snapshot is not an object")
        try:
            values = check_partition_values(keys, part.get("values"), self.limits.max_value_chars)
        except InvalidPathError as exc:
            raise self.fail(where, str(exc)) from None
        where = f"{where} partition {values}"
        self.model(Partition, part, where)
        location = self.location_of(part, where)
        if location is None:
            return None
        canonical = self.location(location, where, kind="partition", table_location=table_location)
        self.report.objects += 1
        return canonical

    def canonical_location_of(self, obj: dict[str, Any]) -> str | None:
        """The canonical location of a snapshot whose location was checked already."""
        location = self.location_of(obj, "")
        return canonical_uri(location) if location else None

    def location_of(self, obj: dict[str, Any], where: str) -> str | None:
        sd = obj.get("sd")
        if sd is None:
            return None
        if not isinstance(sd, dict):
            raise self.fail(where, "sd is not an object")
        location = sd.get("location")
        if location in (None, ""):
            return None
        return location

    def location(self, location: str, where: str, *, kind: str, table_location: str | None = None) -> str:
        """A source location: normalised, below the source roots; mapped, strictly below the target warehouse.
        Returns its canonical form.

        Checked once per validation for the same arguments and target place (a refusal stops the walk)."""
        key = (location, kind, table_location, self.place is not None)
        canonical = self._passed.get(key)
        if canonical is None:
            if (
                len(self._passed) >= LOCATIONS_REMEMBERED
            ):  # bounded: every partition has a location of its own
                self._passed.clear()
            canonical = self._passed[key] = self._check_location(
                location, where, kind=kind, table_location=table_location
            )
        return canonical

    def _mapped_table(self, place: TargetPlace, table_location: str) -> str:
        """The canonical target directory of a table location (``_mapped_tables``)."""
        mapped = self._mapped_tables.get(table_location)
        if mapped is None:
            mapped = canonical_uri(place.mapper.map(table_location) or "/")
            if len(self._mapped_tables) >= TABLES_REMEMBERED:
                self._mapped_tables.clear()
            self._mapped_tables[table_location] = mapped
        return mapped

    def _check_location(
        self, location: str, where: str, *, kind: str, table_location: str | None = None
    ) -> str:
        # A partition directly in its (checked) table's directory, spelled canonically: no parse, and in
        # the roots as its table is.
        name = None
        if kind == "partition" and table_location:
            name = child_name(location, table_location, self.limits.max_location_chars)
        canonical = location if name is not None else self._canonical_in_roots(location, where)
        if kind == "db" or self.place is None:
            return canonical
        place = self.place
        if name is not None and table_location and place.mapper.keeps_relative(table_location):
            mapped = f"{self._mapped_table(place, table_location)}/{name}"
        else:
            try:
                mapped = canonical_uri(place.mapper.map_canonical(canonical))
            except (InvalidPathError, ValueError) as exc:
                raise self.fail(
                    where, f"location {show(location)} maps to no valid target location: {exc}"
                ) from None
        if not is_below(mapped, place.canonical_warehouse, strictly=True):
            raise self.fail(
                where, f"location {show(location)} maps to {show(mapped)}, outside the target warehouse"
            )
        forbidden = [("the target database's own directory", place.canonical_db_location)]
        if table_location is not None:
            forbidden.append(("its table's directory", self._mapped_table(place, table_location)))
        for what, other in forbidden:
            if other and mapped == other:
                raise self.fail(where, f"location {show(location)} maps to {what} ({show(mapped)})")
        if place.canonical_cmroot and is_below(mapped, place.canonical_cmroot):
            raise self.fail(where, f"location {show(location)} maps into the target cmroot")
        return canonical

    def _canonical_in_roots(self, location: str, where: str) -> str:
        """The canonical form of a source location, refused outside this load's source roots."""
        try:
            canonical = canonical_uri(location, self.limits.max_location_chars)
        except InvalidPathError as exc:
            raise self.fail(where, f"location {show(location)} {exc}") from None
        if not self.roots.may_hold_data(canonical):
            raise self.fail(
                where,
                f"location {show(location)} is outside the source warehouse and external roots of this load's "
                f"configuration ({self.roots.describe()}); add its root to {SOURCE_EXTERNAL_ROOTS_ENV} if it "
                "is a trusted external location",
            )
        return canonical

    def object_files(self, files: Any, location: str | None, where: str) -> None:
        """Files of one object: ``location`` is its canonical source location (None: it has none)."""
        if not isinstance(files, list):
            raise self.fail(where, "files is not a list")
        if files and location is None:
            raise self.fail(where, "lists files for an object without a location of its own")
        for encoded in files:
            self.entry(encoded, location, where)

    def entry(self, encoded: Any, location: str | None, where: str, *, require_subdir: bool = False) -> None:
        try:
            check_file_entry(
                encoded, object_location=location, roots=self.roots, require_subdir=require_subdir
            )
        except InvalidPathError as exc:
            raise self.fail(where, str(exc)) from None
        self.report.files += 1
        if self.file_pages is not None:
            self._files_page.append(encoded)
            if len(self._files_page) >= FILES_PAGE:
                self.pass_files()

    def pass_files(self) -> None:
        """Give the checked entries gathered so far to ``file_pages``."""
        if self.file_pages is not None and self._files_page:
            page, self._files_page = self._files_page, []
            self.file_pages(page)
