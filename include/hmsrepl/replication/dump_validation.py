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
(``source_roots``); ``DumpValidator`` walks a ``DumpDir`` (a bootstrap's tree, an incremental's events) and
hands each object it finds to ``dump_snapshot_checks.SnapshotChecks`` (an event's message to
``dump_event_checks.EventChecks``), which apply them. Every refusal is one line naming the dump, the object
and what is wrong (``DumpValidationError``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from hmsrepl.formats.paths import show
from hmsrepl.gc_pause import paused_walk
from hmsrepl.metastore.messages import Message
from hmsrepl.metastore.model import Function
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.dump_event_checks import EventChecks, dumped_partition_name, event_message
from hmsrepl.replication.dump_ownership import DumpOwnership
from hmsrepl.replication.dump_snapshot_checks import SnapshotChecks, TargetPlace
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
from hmsrepl.replication.source_roots import SourceRoots

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
    ``file_pages``: given the checked file entries of what will be applied a page at a time
    (``dump_snapshot_checks.FILES_PAGE`` at most, each entry after its own checks), while the walk goes on:
    the load's pre-flight looks at each page then, so a dump's files are never held whole (a partition of
    1,000,000 files held them all, some 235 MB, until the walk ended). ``own_listing_pages(document, where,
    page)``: given each page of a bootstrap's partition in a directory of its own (``DumpDir.own_listings``,
    in that order) once the page passed its checks and ``file_pages``, for the load to copy while the walk
    goes on; what the walk refuses later is for the load to undo.
    """

    def __init__(
        self,
        dump: DumpDir,
        meta: DumpMetadata,
        roots: SourceRoots,
        place: Callable[[str], TargetPlace],
        known_event_types: Collection[str],
        file_pages: Callable[[list[str]], None] | None = None,
        own_listing_pages: Callable[[dict[str, Any], str, list[str]], None] | None = None,
    ) -> None:
        """``place(source_db_location)`` gives the target side once the source database location is known."""
        self.dump, self.meta = dump, meta
        self.own_listing_pages = own_listing_pages
        self.limits: DumpLimits = dump.limits
        self._place_for = place
        self.report = ValidationReport()
        self.checks = SnapshotChecks(dump.uri, self.limits, roots, self.report, file_pages)
        self.events = EventChecks(self.checks, known_event_types)

    @property
    def place(self) -> TargetPlace | None:
        """The target side (``SnapshotChecks.place``), once the source database location is known."""
        return self.checks.place

    @place.setter
    def place(self, place: TargetPlace) -> None:
        self.checks.place = place

    def fail(self, where: str, what: str) -> DumpValidationError:
        return self.checks.fail(where, what)

    # -- entry points ------------------------------------------------------------------------------------------
    def validate_bootstrap(self) -> ValidationReport:
        meta = self.meta
        self._check_metadata()
        where = DumpLayout.database(meta.db_name)
        database = self._read(where).get("database")
        if not isinstance(database, dict):
            raise self.fail(where, "holds no database snapshot")
        self.report.source_db_location = self.checks.database(database, where, own=True)
        self._tree(self.dump, meta.db_name, None)
        self._acid_state()
        self.checks.pass_files()
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
            self.checks.name("table", name, relative)
            ok = isinstance(table, dict) and isinstance(table.get("high_watermark"), int)
            ok = ok and isinstance(table.get("open"), dict) and isinstance(table.get("aborted"), list)
            if not ok:
                raise self.fail(relative, f"write-id state of table {show(name)} is malformed")

    def validate_incremental(self, last_applied: int, source_db_location: str) -> ValidationReport:
        meta = self.meta
        self._check_metadata()
        self.report.source_db_location = source_db_location
        if source_db_location:
            self.checks.location(
                source_db_location, "the replica's recorded source database location", kind="db"
            )
        self.place = self._place_for(source_db_location)
        pending = self.report.pending_events
        pending.layout_format = meta.format
        previous = seen = 0  # event ids ascend through the segments and within each
        # The kept documents (up to KEEP_EVENT_BYTES of JSON, acyclic) would be rescanned by every full or
        # middle collection while the walk builds more: one young pass a segment instead (``paused_walk``).
        with paused_walk(self.dump.event_segments(meta.format)) as segments:
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
                        message = self.events.event(event)
                        pending.ids.append(event_id)
                        pending.keep(event_id, event.document, event.size, segment, message)
        if meta.last_event_id > last_applied and meta.bootstrapped_tables:
            sub = self.dump.bootstrap_part()
            for name in meta.bootstrapped_tables:
                if sub.exists(DumpLayout.table(meta.db_name, name)):
                    self._tree(sub, DumpLayout.table_dir(meta.db_name, name), f"{BOOTSTRAP_DIR}/")
            self._acid_state(sub, f"{BOOTSTRAP_DIR}/")
        self.checks.pass_files()
        return self.report

    # -- metadata -------------------------------------------------------------------------------------------
    def _check_metadata(self) -> None:
        from hmsrepl.replication.commands import CommandError, parse_policy

        meta = self.meta
        if meta.kind not in ("bootstrap", "incremental"):
            raise self.fail("_dumpmetadata", f"kind {show(meta.kind)} is neither bootstrap nor incremental")
        self.checks.name("database", meta.db_name, "_dumpmetadata")
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
            self.checks.name("table", name, "_dumpmetadata bootstrapped_tables")
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

    def _listing(
        self,
        dump: DumpDir,
        relative: str,
        location: str | None,
        where: str,
        checked: Callable[[list[str]], None] | None = None,
    ) -> None:
        """The ``_files`` listing at ``relative`` of the object at ``location``, checked a page at a time
        (bounded in size: DumpDir.limits), naming each file once (``ListingRepeats``). ``checked``: given each
        page once its entries passed their checks and the pre-flight looked at them."""
        repeats = ListingRepeats()
        for page in dump.files_pages(relative):
            self.checks.object_files(page, location, where)
            repeats.add(page)
            if checked is not None:
                self.checks.pass_files()
                checked(page)
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
        for relative in dump.tree_order(base):
            found = DumpLayout.entry(relative)
            where = shown + relative
            if found.kind == DATABASE and relative == DumpLayout.database(self.meta.db_name):
                continue  # the database: checked by the caller
            if found.kind == FUNCTION or relative.split("/")[1:2] == [FUNCTIONS_DIR]:
                function = self._read(relative, dump, shown).get("function")
                if not isinstance(function, dict):
                    raise self.fail(where, "holds no function snapshot")
                self.checks.name("function", function.get("function_name"), where)
                self.checks.model(Function, function, where)
                continue
            if found.table is None:
                raise self.fail(where, "is not where a dump keeps a table or partition")
            doc = self._read(relative, dump, shown)
            files_at = DumpLayout.files_of(relative)
            if found.kind == TABLE:
                table = doc.get("table")
                if not isinstance(table, dict) or table.get("table_name") != found.table:
                    raise self.fail(where, f"holds no snapshot of table {show(found.table)}")
                location, keys, is_managed = self.checks.table(table, where)
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
                location = self.checks.partition(part, keys, table_location, where)
                own_dirs.setdefault(found.table, set()).add(dumped_partition_name(keys, part))
                if found.table in managed:
                    owners.partition(found.table, dumped_partition_name(keys, part), location)
                own = self.own_listing_pages if prefix is None else None  # a bootstrap's own tree
                checked = None if own is None else partial(own, doc, where)
                self._listing(dump, files_at, location, shown + files_at, checked)
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
            with paused_walk(dump.partition_pages(DumpLayout.table_dir(parts_db(base), name))) as pages:
                for page in pages:
                    for dumped in dump.read_partition_page(page):
                        where = shown + dumped.where
                        doc = dumped.document
                        part = doc.get("partition") if isinstance(doc, dict) else None
                        if not isinstance(part, dict):
                            raise self.fail(where, "holds no partition snapshot")
                        location = self.checks.partition(part, keys, table_location, where)
                        part_name = dumped_partition_name(keys, part)
                        if part_name in seen:
                            raise self.fail(
                                where, f"names partition {show(part_name)} of {show(name)} a second time"
                            )
                        seen.add(part_name)
                        if name in managed:
                            owners.partition(name, part_name, location)
                        files = [] if dumped.files is None else dumped.files
                        self.checks.object_files(files, location, where)
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


def parts_db(base: str) -> str:
    """The database of a bootstrap layout's ``base`` (``<db>`` or ``<db>/<table>``)."""
    return base.split("/", 1)[0]
