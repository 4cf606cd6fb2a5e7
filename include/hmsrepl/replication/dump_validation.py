"""A dump directory is untrusted input: the load checks all of it before its first change.

Anyone who can write to the dump root can make a dump say anything, so nothing in it is taken on trust:

- **Where files may come from** is the load's own configuration (``SourceRoots``: the source warehouse,
  cmroot and external roots, ``HMSREPL_SOURCE_WAREHOUSE`` / ``_CMROOT`` / ``_EXTERNAL_ROOTS``), never the
  roots a dump's ``_dumpmetadata`` declares. Every location and file URI is normalised first
  (``canonical_uri``: an allowed scheme, absolute, no ``.``/``..``/empty segment, no NUL or control
  character), then tested for containment segment by segment, so ``<location>/../../x`` and
  ``file://otherhost/x`` never pass a prefix test they should fail.
- **Every file entry** (``_files`` lines and the file lists inside event snapshots) decodes with the file-URI
  codec, names a file below its own object's location, has a clean relative ``subdir``, a well-formed
  checksum (``crc32c-<8 hex>-<size>``: an empty one would skip verification) and a cmroot part below the
  configured source cmroot.
- **Where data goes**: every location, mapped to the target (``LocationMapper``), must lie strictly below
  the target warehouse and must not be the target database's own directory, so a load never writes,
  replaces or recycles files outside the objects it replicates.
- **Iceberg tables** name their metadata (``metadata_location``, ``previous_metadata_location``) strictly
  below their own location, normalised (``formats.iceberg_tables``): the load reads it and writes its
  rewrite beside the copy.
- **Names** that become path components or catalog keys (databases, tables, functions, partition keys) are
  bounded and hold no path separator, NUL or control character; partition values are bounded and have no
  ``.``/``..`` segment.
- **Sizes** are bounded before parsing (``DumpLimits``: bytes of a ``_metadata``/``_files``, JSON nesting,
  events per dump), so a hostile dump cannot exhaust the loader's memory or stack.

The checks are pure functions over parsed documents (``dump_checks``) and the load's own roots
(``source_roots``); ``DumpValidator`` walks a ``DumpDir`` and applies them. Every refusal is one line naming
the dump, the object and what is wrong (``DumpValidationError``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from hmsrepl.formats.iceberg_tables import metadata_refusal
from hmsrepl.formats.json_text import dumps_sorted
from hmsrepl.formats.partition_names import parse_partition_name
from hmsrepl.formats.paths import (
    InvalidPathError,
    canonical_uri,
    check_relative_path,
    child_name,
    is_below,
    show,
)
from hmsrepl.gc_pause import paused_walk
from hmsrepl.metastore.event_specs import parse
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import MESSAGE_FORMAT_VERSION, Message
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.replication.dump_checks import (
    DumpValidationError,
    check_file_entry,
    check_name,
    check_partition_values,
)
from hmsrepl.replication.dump_ownership import DumpOwnership
from hmsrepl.replication.layout import (
    BOOTSTRAP_DIR,
    DATABASE,
    EVENTS_DIR,
    FORMAT_VERSION,
    FUNCTION,
    FUNCTIONS_DIR,
    PARTITIONS_DIR,
    TABLE,
    DumpDir,
    DumpedEvent,
    DumpLayout,
    DumpLimits,
    DumpMetadata,
)
from hmsrepl.replication.listing_repeats import ListingRepeats, repeated_place
from hmsrepl.replication.source_roots import SOURCE_EXTERNAL_ROOTS_ENV, SourceRoots

if TYPE_CHECKING:
    from hmsrepl.replication.locations import LocationMapper

LOCATIONS_REMEMBERED = 4096  # locations a validation remembers as checked (then starts over)
TABLES_REMEMBERED = 256  # distinct table snapshots a validation remembers as checked (then starts over)
FILES_PAGE = 10_000  # checked file entries a validation gathers before it gives them on (``file_pages``)
Fields = dict[str, type | tuple[type, ...]]
E = EventType
#: What each event type's message must hold for its handler (checked before the load, not found missing half-way).
EVENT_FIELDS: dict[EventType, Fields] = {
    E.CREATE_DATABASE: {},
    E.ALTER_DATABASE: {"after": dict},
    E.DROP_DATABASE: {},
    E.CREATE_TABLE: {"table": dict},
    E.ALTER_TABLE: {"before": dict, "after": dict},
    E.DROP_TABLE: {"table": dict},
    E.ADD_PARTITION: {"table": dict, "partitions": list},
    E.ALTER_PARTITION: {"table": dict, "after": dict},
    E.DROP_PARTITION: {"table": dict, "partitions": list},
    E.INSERT: {"table": dict},
    E.CREATE_FUNCTION: {"function": dict},
    E.DROP_FUNCTION: {"function": dict},
    E.OPEN_TXN: {"txn_ids": list},
    E.COMMIT_TXN: {"txn_id": int},
    E.ABORT_TXN: {"txn_id": int},
    E.ALLOC_WRITE_ID: {"table": str, "txn_to_write_ids": list},
    E.ACID_WRITE: {"txn_id": int},
    E.UPDATE_TABLE_COLUMN_STAT: {},
    E.UPDATE_PARTITION_COLUMN_STAT: {},
    E.DELETE_TABLE_COLUMN_STAT: {},
    E.DELETE_PARTITION_COLUMN_STAT: {},
}
#: Where each message format keeps the data of the events that always carry some (``messages``): format 1
#: full listings (one per partition for ADD_PARTITION), format 2 one data change (one per partition).
DATA_FIELDS: dict[int, dict[EventType, Fields]] = {
    1: {E.ADD_PARTITION: {"files": list}, E.INSERT: {"files": list}},
    MESSAGE_FORMAT_VERSION: {E.ADD_PARTITION: {"data": list}, E.INSERT: {"data": dict}},
}


class CheckedTable(NamedTuple):
    """What the checks of a table snapshot found: its canonical location, its partition keys' names and whether
    it is managed, as the catalog decides it (``Table.is_managed``)."""

    location: str | None
    keys: list[str]
    managed: bool


# -- the walk over a dump ----------------------------------------------------------------------------------------
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


#: Bytes of event JSON whose checked documents a validation keeps for the load's apply (about 5x that in
#: memory once parsed): ~11,000 events of a metadata-only dump. Events past it are read again when applied.
KEEP_EVENT_BYTES = 16 * 1024 * 1024


@dataclass
class PendingEvents:
    """The events a load will apply, in order, and the documents validation read for them.

    The apply takes each event's document from here instead of reading and parsing it again: it then
    applies exactly the document that was checked, even if the dump directory changes meanwhile. Documents
    are kept up to ``budget`` bytes of JSON (memory stays bounded for any dump size); an event past it is
    read again from its segment (``segments``), a segment at a time. With a kept document goes the typed
    message validation parsed from it (``messages``; about a third of the document's memory), so neither
    the pre-flight nor the apply parses it again; a document read again is parsed again.
    """

    ids: list[int] = field(default_factory=list)
    documents: dict[int, dict[str, Any]] = field(default_factory=dict)
    messages: dict[int, Message[Any]] = field(default_factory=dict)  # parsed from ``documents``' own
    segments: dict[int, str] = field(default_factory=dict)  # event id -> its segment, for events not kept
    layout_format: int = FORMAT_VERSION
    budget: int = KEEP_EVENT_BYTES
    _reread: tuple[str, dict[int, dict[str, Any]]] = ("", {})  # the segment read again last, by event id

    def keep(
        self,
        event_id: int,
        document: dict[str, Any],
        size: int,
        segment: str,
        message: Message[Any] | None = None,
    ) -> None:
        """Keep a checked document while the budget lasts (the apply reads the others again), and the
        message validation parsed from that same document, if it parsed one."""
        if size <= self.budget:
            self.budget -= size
            self.documents[event_id] = document
            if message is not None:
                self.messages[event_id] = message
        else:
            self.segments[event_id] = segment

    def document(self, dump: DumpDir, event_id: int) -> dict[str, Any]:
        """The event's document: the one validation kept, else read again from its segment."""
        kept = self.documents.get(event_id)
        if kept is not None:
            return kept
        segment = self.segments[event_id]
        if self._reread[0] != segment:
            events = dump.read_segment(segment, self.layout_format)
            self._reread = (segment, {e.document["event_id"]: e.document for e in events})
        return self._reread[1][event_id]

    def take(self, dump: DumpDir, event_id: int) -> dict[str, Any]:
        """The event's document, no longer kept here (the apply needs each one once)."""
        document = self.document(dump, event_id)
        self.documents.pop(event_id, None)
        return document

    def message(self, dump: DumpDir, event_id: int) -> Message[Any]:
        """The event's typed message: the one parsed from the kept document, else parsed from the document."""
        kept = self.messages.get(event_id)
        return kept if kept is not None else event_message(self.document(dump, event_id))

    def take_parsed(self, dump: DumpDir, event_id: int) -> tuple[dict[str, Any], Message[Any]]:
        """The event's document and typed message, no longer kept here (``take``)."""
        message = self.message(dump, event_id)
        self.messages.pop(event_id, None)
        return self.take(dump, event_id), message


def event_message(event: dict[str, Any]) -> Message[Any]:
    """The typed message of a dumped event's document."""
    return parse(event["event_type"], event["message"], event.get("db"), event.get("table"))


@dataclass
class ValidationReport:
    """What the walk saw: counted for messages and tests."""

    objects: int = 0
    most_partitions: int = 0  # of one table: a table's partitions are loaded by one writer, in one batch
    files: int = 0
    events: int = 0
    source_db_location: str = ""
    pending_events: PendingEvents = field(default_factory=PendingEvents)  # incremental: what will be applied


class DumpValidator:
    """Checks a whole dump against the load's configuration before the load changes anything.

    ``known_event_types``: the event types the load can apply (others are refused here, not half-way).
    ``file_pages``: given the checked file entries of what will be applied a page at a time (at most
    ``FILES_PAGE``, each entry after its own checks), while the walk goes on: the load's pre-flight looks at
    each page then, so a dump's files are never held whole (a partition of 1,000,000 files held them all,
    some 235 MB, until the walk ended).
    """

    def __init__(
        self,
        dump: DumpDir,
        meta: DumpMetadata,
        roots: SourceRoots,
        place: Callable[[str], TargetPlace],
        known_event_types: Collection[str],
        file_pages: Callable[[list[str]], None] | None = None,
    ) -> None:
        """``place(source_db_location)`` gives the target side once the source database location is known."""
        self.file_pages = file_pages
        self._files_page: list[str] = []  # checked entries not yet given to ``file_pages``
        self.dump, self.meta, self.roots = dump, meta, roots
        self.limits: DumpLimits = dump.limits
        self._place_for = place
        self.place: TargetPlace | None = None
        self.known_event_types = known_event_types
        self.report = ValidationReport()
        # Locations that passed ``_location``: events repeat their table's snapshot (every partition event of
        # a table names its location), and the check depends only on its arguments and the target place.
        # ``place`` is set once (None until the source database location is known): part of the key.
        # Each passed location's canonical form, so the caller does not parse it again.
        self._passed: dict[tuple[str, str, str | None, bool], str] = {}
        # Each table location's mapped canonical form (the directory its partitions must not map onto):
        # computed once per table, not once per partition; bounded like ``_tables_passed``.
        self._mapped_tables: dict[str, str] = {}
        # Table snapshots that passed ``_table``, by content: every partition event repeats its table's.
        self._tables_passed: dict[tuple[bytes, bool], CheckedTable] = {}

    def fail(self, where: str, what: str) -> DumpValidationError:
        return DumpValidationError(f"dump '{self.dump.uri}' refused, nothing was applied: {where}: {what}")

    # -- entry points ------------------------------------------------------------------------------------------
    def validate_bootstrap(self) -> ValidationReport:
        meta = self.meta
        self._check_metadata()
        where = DumpLayout.database(meta.db_name)
        database = self._read(where).get("database")
        if not isinstance(database, dict):
            raise self.fail(where, "holds no database snapshot")
        self.report.source_db_location = self._database(database, where, own=True)
        self._tree(self.dump, meta.db_name, None)
        self._acid_state()
        self._pass_files()
        return self.report

    def _acid_state(self, dump: DumpDir | None = None, prefix: str = "") -> None:
        """``<db>/_acid_state`` (ACID tables' write-id state): names and integers only (``dump``: the
        bootstrap part of an incremental dump, its paths shown under ``prefix``)."""
        dump = dump or self.dump
        relative = DumpLayout.acid_state(self.meta.db_name)
        if not dump.exists(relative):
            return
        state = self._read(relative, dump, prefix)
        relative = prefix + relative
        txns, tables = state.get("open_txns"), state.get("tables")
        if (
            not isinstance(txns, list)
            or not all(isinstance(t, int) for t in txns)
            or not isinstance(tables, dict)
        ):
            raise self.fail(relative, "open_txns or tables are malformed")
        for name, table in tables.items():
            self._name("table", name, relative)
            ok = isinstance(table, dict) and isinstance(table.get("high_watermark"), int)
            ok = ok and isinstance(table.get("open"), dict) and isinstance(table.get("aborted"), list)
            if not ok:
                raise self.fail(relative, f"write-id state of table {show(name)} is malformed")

    def validate_incremental(self, last_applied: int, source_db_location: str) -> ValidationReport:
        meta = self.meta
        self._check_metadata()
        self.report.source_db_location = source_db_location
        if source_db_location:
            self._location(source_db_location, "the replica's recorded source database location", kind="db")
        self.place = self._place_for(source_db_location)
        pending = self.report.pending_events
        pending.layout_format = meta.format
        previous = seen = 0  # event ids ascend through the segments and within each
        # The kept documents (up to KEEP_EVENT_BYTES of JSON, acyclic) would be rescanned by every full or
        # middle collection while the walk builds more: one young pass a segment instead (``paused_walk``).
        segments = paused_walk(self.dump.event_segments(meta.format))
        with contextlib.closing(segments):
            for first, segment in segments:
                for event in self.dump.read_segment(segment, meta.format):
                    event_id = self._event_id(event, first, previous)
                    previous, seen = event_id, seen + 1
                    if seen > self.limits.max_events:
                        raise self.fail(
                            EVENTS_DIR,
                            f"holds more than {self.limits.max_events} events (HMSREPL_DUMP_MAX_EVENTS); "
                            "dump with a LIMIT",
                        )
                    if event_id > last_applied:
                        message = self._event(event)
                        pending.ids.append(event_id)
                        pending.keep(event_id, event.document, event.size, segment, message)
        if meta.last_event_id > last_applied and meta.bootstrapped_tables:
            sub = self.dump.bootstrap_part()
            for name in meta.bootstrapped_tables:
                if sub.exists(DumpLayout.table(meta.db_name, name)):
                    self._tree(sub, DumpLayout.table_dir(meta.db_name, name), f"{BOOTSTRAP_DIR}/")
            self._acid_state(sub, f"{BOOTSTRAP_DIR}/")
        self._pass_files()
        return self.report

    # -- metadata -------------------------------------------------------------------------------------------
    def _check_metadata(self) -> None:
        from hmsrepl.replication.commands import CommandError, parse_policy

        meta = self.meta
        if meta.kind not in ("bootstrap", "incremental"):
            raise self.fail("_dumpmetadata", f"kind {show(meta.kind)} is neither bootstrap nor incremental")
        self._name("database", meta.db_name, "_dumpmetadata")
        for what in ("from_event_id", "to_event_id", "last_event_id", "event_count"):
            value = getattr(meta, what)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise self.fail("_dumpmetadata", f"{what} {show(value)} is not a non-negative integer")
        if not isinstance(meta.settings, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.settings.items()
        ):
            raise self.fail("_dumpmetadata", "settings are not a map of strings")
        if not isinstance(meta.bootstrapped_tables, list):
            raise self.fail("_dumpmetadata", "bootstrapped_tables is not a list")
        for name in meta.bootstrapped_tables:
            self._name("table", name, "_dumpmetadata bootstrapped_tables")
        try:
            policy = parse_policy(meta.policy) if isinstance(meta.policy, str) else None
        except CommandError as exc:
            raise self.fail("_dumpmetadata", f"policy {show(meta.policy)} does not parse: {exc}") from None
        if policy is None or policy.db_name != meta.db_name:
            raise self.fail(
                "_dumpmetadata", f"policy {show(meta.policy)} is not a policy of '{meta.db_name}'"
            )

    # -- documents ------------------------------------------------------------------------------------------
    def _read(self, relative: str, dump: DumpDir | None = None, prefix: str = "") -> dict[str, Any]:
        return self._read_sized(relative, dump, prefix)[0]

    def _read_sized(
        self, relative: str, dump: DumpDir | None = None, prefix: str = ""
    ) -> tuple[dict[str, Any], int]:
        """A JSON object and its size in bytes (events are kept for the apply, counted in bytes)."""
        # Bounded in size and depth (DumpDir.limits).
        body, size = (dump or self.dump).read_json_sized(relative)
        if not isinstance(body, dict):
            raise self.fail(prefix + relative, "is not a JSON object")
        return body, size

    def _listing(self, dump: DumpDir, relative: str, location: str | None, where: str) -> None:
        """The ``_files`` listing at ``relative`` of the object at ``location``, checked a page at a time
        (bounded in size: DumpDir.limits), naming each file once (``ListingRepeats``)."""
        repeats = ListingRepeats()
        for page in dump.files_pages(relative):
            self._object_files(page, location, where)
            repeats.add(page)
        self._named_once(repeats.repeated(lambda: dump.files_pages(relative)), where)

    def _named_once(self, repeated: str, where: str) -> None:
        """Refuse a bootstrap object's files for the place they name twice (``repeated``, "" when none)."""
        if repeated:
            raise self.fail(
                where, f"names the file {show(repeated)} twice (corrupt dump): dump the object again"
            )

    def _tree(self, dump: DumpDir, base: str, prefix: str | None) -> None:
        """A bootstrap layout below ``base`` (a database, or one table of ``_bootstrap``)."""
        shown = prefix or ""
        if self.place is None:
            self.place = self._place_for(self.report.source_db_location)
        tables: dict[str, tuple[str | None, list[str]]] = {}
        managed: set[str] = set()
        owners = DumpOwnership()  # managed tables' and partitions' locations: each must own its own
        own_dirs: dict[str, set[str]] = {}  # partitions in their own directories, by table
        listed = list(dump.metadata_files(base))
        # tables before partitions: a partition directory may sort before its table's _metadata ('%', digits)
        for relative in sorted(listed, key=lambda rel: rel.count("/")):
            found = DumpLayout.entry(relative)
            where = shown + relative
            if found.kind == DATABASE and relative == DumpLayout.database(self.meta.db_name):
                continue  # the database: checked by the caller
            if found.kind == FUNCTION or relative.split("/")[1:2] == [FUNCTIONS_DIR]:
                function = self._read(relative, dump, shown).get("function")
                if not isinstance(function, dict):
                    raise self.fail(where, "holds no function snapshot")
                self._name("function", function.get("function_name"), where)
                self._model(Function, function, where)
                continue
            if found.table is None:
                raise self.fail(where, "is not where a dump keeps a table or partition")
            doc = self._read(relative, dump, shown)
            files_at = DumpLayout.files_of(relative)
            if found.kind == TABLE:
                table = doc.get("table")
                if not isinstance(table, dict) or table.get("table_name") != found.table:
                    raise self.fail(where, f"holds no snapshot of table {show(found.table)}")
                location, keys, is_managed = self._table(table, where)
                tables[found.table] = (location, keys)
                if is_managed:
                    managed.add(found.table)
                    owners.table(found.table, location)
                self._listing(dump, files_at, location, shown + files_at)
            else:
                if found.table not in tables:
                    raise self.fail(
                        where, f"is a partition of table {show(found.table)}, which has no _metadata"
                    )
                table_location, keys = tables[found.table]
                part = doc.get("partition")
                if not isinstance(part, dict):
                    raise self.fail(where, "holds no partition snapshot")
                location = self._partition(part, keys, table_location, where)
                own_dirs.setdefault(found.table, set()).add(_partition_name(keys, part))
                if found.table in managed:
                    owners.partition(found.table, _partition_name(keys, part), location)
                self._listing(dump, files_at, location, shown + files_at)
        self._pages(dump, base, shown, tables, managed, owners, own_dirs)
        self._count_partitions(*own_dirs.values())  # tables without pages
        conflict = owners.conflict()
        if conflict:
            raise self.fail(shown + base if base else shown or self.dump.uri, conflict)

    def _pages(
        self,
        dump: DumpDir,
        base: str,
        shown: str,
        tables: dict[str, tuple[str | None, list[str]]],
        managed: set[str],
        owners: DumpOwnership,
        own_dirs: dict[str, set[str]],
    ) -> None:
        """The partition pages below ``base``: each at ``<db>/<table>/_partitions/<page>`` of a dumped table,
        each line a partition of it (named once in the table) with its files."""
        marker = f"/{PARTITIONS_DIR}/"
        page_tables = set()
        for relative in dump.files_below(base):
            if marker not in relative:
                continue
            parts = relative.split("/")
            if len(parts) != 4 or parts[2] != PARTITIONS_DIR:
                raise self.fail(shown + relative, "is not where a dump keeps a page of partitions")
            if parts[1] not in tables:
                raise self.fail(
                    shown + relative, f"holds partitions of table {show(parts[1])}, which has no _metadata"
                )
            page_tables.add(parts[1])
        for name in sorted(page_tables):
            table_location, keys = tables[name]
            seen = own_dirs.pop(name, set())  # this table's names, dropped with it: memory is one table's
            # A page's documents hold no cycles: one young pass after it, not a pass every few hundred
            # partitions over everything the walk keeps (``gc_pause``).
            pages = paused_walk(dump.partition_pages(DumpLayout.table_dir(parts_db(base), name)))
            with contextlib.closing(pages):
                for page in pages:
                    for dumped in dump.read_partition_page(page):
                        where = shown + dumped.where
                        doc = dumped.document
                        part = doc.get("partition") if isinstance(doc, dict) else None
                        if not isinstance(part, dict):
                            raise self.fail(where, "holds no partition snapshot")
                        location = self._partition(part, keys, table_location, where)
                        part_name = _partition_name(keys, part)
                        if part_name in seen:
                            raise self.fail(
                                where, f"names partition {show(part_name)} of {show(name)} a second time"
                            )
                        seen.add(part_name)
                        if name in managed:
                            owners.partition(name, part_name, location)
                        files = [] if dumped.files is None else dumped.files
                        self._object_files(files, location, where)
                        self._named_once(repeated_place(files), where)
            owners.table_done(name)
            self._count_partitions(seen)

    def _count_partitions(self, *tables: set[str]) -> None:
        """Note the number of partitions of the biggest of ``tables`` (each its partitions' names)."""
        self.report.most_partitions = max([self.report.most_partitions, *map(len, tables)])

    def _event_id(self, event: DumpedEvent, first: int, previous: int) -> int:
        """The event's id, which must follow ``previous`` and lie in its segment (starting at ``first``)."""
        doc = event.document
        if not isinstance(doc, dict):
            raise self.fail(event.where, "is not a JSON object")
        event_id = doc.get("event_id")
        if not isinstance(event_id, int) or isinstance(event_id, bool):
            raise self.fail(event.where, f"holds event id {show(event_id)}, not an integer")
        if event_id <= previous or event_id < first or (self.meta.format < 2 and event_id != first):
            raise self.fail(
                event.where, f"holds event {event_id} out of order (after {previous}, from {first})"
            )
        return event_id

    def _event(self, event: DumpedEvent) -> Message[Any] | None:
        """Check one event; its typed message when the checks parsed one (format 2 and later)."""
        where, doc = event.where, event.document
        kind = doc.get("event_type")
        if kind not in self.known_event_types:
            raise self.fail(where, f"event type {show(kind)} is not one a load can apply")
        body = doc.get("message")
        if not isinstance(body, dict):
            raise self.fail(where, "holds no event message")
        where = f"{where} ({kind})"
        version = body.get("v", 1)
        if version not in DATA_FIELDS:
            raise self.fail(where, f"message format {show(version)} is not one this load reads")
        fields = {**EVENT_FIELDS.get(kind, {}), **DATA_FIELDS[version].get(kind, {})}
        for key, wanted in fields.items():
            if not isinstance(body.get(key), wanted) or isinstance(body.get(key), bool):
                raise self.fail(where, f"message has no valid '{key}'")
        per_partition = "data" if version >= 2 else "files"
        if kind == E.ADD_PARTITION and len(body[per_partition]) != len(body["partitions"]):
            raise self.fail(where, "has a different number of file lists and partitions")
        for key in ("table", "db"):
            if doc.get(key) is not None:
                self._name("table" if key == "table" else "database", doc[key], where)
        self.report.events += 1
        self._message(body, where)
        message = self._changes(doc, where) if version >= 2 else None
        if not isinstance(event.files, list):
            raise self.fail(where, "files is not a list")
        for encoded in event.files:
            self._entry(encoded, None, f"{where} files")
        return message

    def _changes(self, event: dict[str, Any], where: str) -> Message[Any]:
        """A format-2 message's data changes: files added below their own object, removed paths below it.
        Returns the message, parsed as the apply parses it (``event_message``)."""
        body = event["message"]
        docs = body.get("data")
        for doc in docs if isinstance(docs, list) else [docs]:
            if doc is None:
                continue
            ok = isinstance(doc, dict) and all(isinstance(doc.get(k, []), list) for k in ("added", "removed"))
            ok = ok and isinstance(doc.get("count") or 0, int) and isinstance(doc.get("digest") or "", str)
            if not ok:
                raise self.fail(where, "data change is malformed (added, removed, count or digest)")
        try:
            message = event_message(event)
            objects = message.objects()
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self.fail(where, f"data change does not match the message's objects: {exc}") from None
        for obj in objects:
            if obj.change.added:  # the location only matters to files (a metadata-only change has none)
                self._object_files(
                    list(obj.change.added), self._canonical_location_of(obj.snapshot.to_json()), where
                )
            for removed in obj.change.removed:
                try:
                    check_relative_path(removed, "removed file")
                except InvalidPathError as exc:
                    raise self.fail(where, str(exc)) from None
                if not removed:
                    raise self.fail(where, "a removed file has an empty path")
        return message

    def _message(self, body: dict[str, Any], where: str) -> None:
        """Every snapshot and file list an event message holds, whatever its type."""
        table_location: str | None = None
        keys: list[str] = []
        table_managed = False
        table = body.get("table")
        if isinstance(table, dict):
            table_location, keys, table_managed = self._table(table, where)
        elif table is not None:  # ALLOC_WRITE_ID names its table
            self._name("table", table, where)
        for side in ("before", "after"):
            snapshot = body.get(side)
            if not isinstance(snapshot, dict):
                continue
            if "values" in snapshot:
                self._partition(snapshot, keys, table_location, f"{where} {side}")
            elif "location_uri" in snapshot or "name" in snapshot:
                self._database(snapshot, f"{where} {side}", own=False)
            else:
                location, keys_after, _ = self._table(snapshot, f"{where} {side}")
                if side == "after":
                    table_location, keys = location, keys_after
        partitions = body.get("partitions")
        part_locations: list[str | None] = []
        if partitions is not None:
            if not isinstance(partitions, list):
                raise self.fail(where, "partitions is not a list")
            part_locations = [self._partition(p, keys, table_location, where) for p in partitions]
            if isinstance(table, dict) and table_managed:
                self._check_ownership(str(table.get("table_name")), table_location, keys, partitions, where)
        single = body.get("partition")
        single_location = None
        if isinstance(single, dict):
            single_location = self._partition(single, keys, table_location, where)
        if isinstance(body.get("function"), dict):
            self._name("function", body["function"].get("function_name"), where)
            if kind_creates_function(body):
                self._model(Function, body["function"], where)
        writes = body.get("writes")
        if writes is not None:
            self._writes(writes, where)
        files = body.get("files")
        if files is None or writes is not None:  # a commit's flat list repeats its writes' files
            for encoded in files or []:
                self._entry(encoded, None, where)
            return
        if not isinstance(files, list):
            raise self.fail(where, "files is not a list")
        if files and (
            files[0] is None or isinstance(files[0], list)
        ):  # ADD_PARTITION: one list per partition
            if len(files) != len(part_locations):
                raise self.fail(where, "has a different number of file lists and partitions")
            for group, location in zip(files, part_locations, strict=True):
                self._object_files(group or [], location, where)
            return
        self._object_files(files, self._object_location(body, single_location, table_location), where)

    def _check_ownership(
        self, table: str, location: str | None, keys: list[str], partitions: list[Any], where: str
    ) -> None:
        """One event's partitions of a managed table: each below its table or elsewhere, never a sibling's."""
        owners = DumpOwnership()
        owners.table(table, location)
        for part in partitions:
            owners.partition(table, _partition_name(keys, part), self._canonical_location_of(part))
        conflict = owners.conflict()
        if conflict:
            raise self.fail(where, conflict)

    def _object_location(
        self, body: dict[str, Any], single_location: str | None, table_location: str | None
    ) -> str | None:
        """The location of the one object whose data a (non ADD_PARTITION) event changes."""
        after = body.get("after")
        if isinstance(after, dict) and "values" in after:  # ALTER_PARTITION
            return self._canonical_location_of(after)
        if single_location is not None:  # INSERT into a partition
            return single_location
        if isinstance(after, dict):  # ALTER_TABLE
            return self._canonical_location_of(after)
        return table_location

    def _writes(self, writes: Any, where: str) -> None:
        if not isinstance(writes, list):
            raise self.fail(where, "writes is not a list")
        for write in writes:
            if not isinstance(write, dict):
                raise self.fail(where, "a write is not an object")
            self._name("table", write.get("table"), where)
            if not isinstance(write.get("write_id"), int):
                raise self.fail(where, f"write of {show(write.get('table'))} has no integer write id")
            if write.get("partition"):
                try:
                    pairs = parse_partition_name(write["partition"])
                    check_partition_values([k for k, _ in pairs], [v for _, v in pairs])
                except (ValueError, TypeError, AttributeError) as exc:
                    raise self.fail(where, f"write partition {show(write['partition'])}: {exc}") from None
            files = write.get("files")
            if not isinstance(files, list):
                raise self.fail(where, f"write of {show(write.get('table'))} has no file list")
            for encoded in files:
                self._entry(encoded, None, where, require_subdir=True)

    # -- objects --------------------------------------------------------------------------------------------
    def _name(self, kind: str, name: Any, where: str) -> str:
        try:
            return check_name(kind, name, self.limits.max_name_chars)
        except InvalidPathError as exc:
            raise self.fail(where, str(exc)) from None

    def _model(self, model: Any, snapshot: dict[str, Any], where: str) -> Any:
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

    def _database(self, database: dict[str, Any], where: str, *, own: bool) -> str:
        self._model(Database, database, where)
        self._name("database", database.get("name"), where)
        location = database.get("location_uri") or ""
        if location:
            self._location(location, where, kind="db")
        return location

    def _table(self, table: dict[str, Any], where: str) -> CheckedTable:
        """A table snapshot's checks, made once per content and target place (``_check_table``)."""
        key = (dumps_sorted(table), self.place is not None)
        passed = self._tables_passed.get(key)
        if passed is None:
            passed = self._check_table(table, where)
            if len(self._tables_passed) >= TABLES_REMEMBERED:  # bounded: a dump may hold millions of tables
                self._tables_passed.clear()
            self._tables_passed[key] = passed
        self.report.objects += 1
        return passed

    def _check_table(self, table: dict[str, Any], where: str) -> CheckedTable:
        name = self._name("table", table.get("table_name"), where)
        where = f"{where} table '{name}'"
        model: Table = self._model(Table, table, where)
        keys = table.get("partition_keys") or []
        if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
            raise self.fail(where, "partition_keys is not a list of columns")
        key_names = [self._name("partition key", k.get("name"), where) for k in keys]
        location = self._location_of(table, where)
        if location is not None:
            self._location(location, where, kind="table")
        params = table.get("parameters") or {}
        reason = metadata_refusal(name, params, location) if isinstance(params, dict) else None
        if reason:  # the load would read the metadata there and write its rewrite beside the copy
            raise self.fail(where, reason)
        return CheckedTable(canonical_uri(location) if location else None, key_names, model.is_managed)

    def _partition(self, part: Any, keys: list[str], table_location: str | None, where: str) -> str | None:
        if not isinstance(part, dict):
            raise self.fail(where, "a partition snapshot is not an object")
        try:
            values = check_partition_values(keys, part.get("values"), self.limits.max_value_chars)
        except InvalidPathError as exc:
            raise self.fail(where, str(exc)) from None
        where = f"{where} partition {values}"
        self._model(Partition, part, where)
        location = self._location_of(part, where)
        if location is None:
            return None
        canonical = self._location(location, where, kind="partition", table_location=table_location)
        self.report.objects += 1
        return canonical

    def _canonical_location_of(self, obj: dict[str, Any]) -> str | None:
        """The canonical location of a snapshot whose location was checked already."""
        location = self._location_of(obj, "")
        return canonical_uri(location) if location else None

    def _location_of(self, obj: dict[str, Any], where: str) -> str | None:
        sd = obj.get("sd")
        if sd is None:
            return None
        if not isinstance(sd, dict):
            raise self.fail(where, "sd is not an object")
        location = sd.get("location")
        if location in (None, ""):
            return None
        return location

    def _location(self, location: str, where: str, *, kind: str, table_location: str | None = None) -> str:
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

    def _object_files(self, files: Any, location: str | None, where: str) -> None:
        """Files of one object: ``location`` is its canonical source location (None: it has none)."""
        if not isinstance(files, list):
            raise self.fail(where, "files is not a list")
        if files and location is None:
            raise self.fail(where, "lists files for an object without a location of its own")
        for encoded in files:
            self._entry(encoded, location, where)

    def _entry(self, encoded: Any, location: str | None, where: str, *, require_subdir: bool = False) -> None:
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
                self._pass_files()

    def _pass_files(self) -> None:
        """Give the checked entries gathered so far to ``file_pages``."""
        if self.file_pages is not None and self._files_page:
            page, self._files_page = self._files_page, []
            self.file_pages(page)


def parts_db(base: str) -> str:
    """The database of a bootstrap layout's ``base`` (``<db>`` or ``<db>/<table>``)."""
    return base.split("/", 1)[0]


def _partition_name(keys: list[str], part: dict[str, Any]) -> str:
    return "/".join(f"{key}={value}" for key, value in zip(keys, part.get("values") or [], strict=False))


def kind_creates_function(body: dict[str, Any]) -> bool:
    """A function snapshot complete enough to create (DROP_FUNCTION may carry only its name)."""
    return "class_name" in body["function"]
