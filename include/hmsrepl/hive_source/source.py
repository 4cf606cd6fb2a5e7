"""A stock Hive Metastore (Hive 2.3 and later) as the source of REPL DUMP.

Reads go through the import's Thrift client (``hive_import.reader``). The notification log is Hive's
(``get_next_notification``, ``get_current_notificationEventId``), as ``DbNotificationListener`` writes it
when it is one of the metastore's transactional event listeners; each event is translated into this
product's body by ``hive_source.messages`` when it is read, and kept for the rest of the dump (a dump reads
its window two or three times). Without such a listener Hive's log stays empty: the first read says so and
names the setting, instead of dumping nothing.

What a stock source does not give, and what the dump then holds:
- checksums: files are described when read, with this product's checksums (``hive_source.messages``);
- transactions: Hive 3/4 txn events are translated (``txn_messages``), a commit's files read from its write
  ids' directories; a bootstrap's txn snapshot is read with ``get_open_txns`` and ``get_valid_write_ids``
  (``txn_state``); nothing waits for open txns (Hive does not say which database a txn writes);
- column statistics: not dumped (the bootstrap's ``_column_stats`` stays empty).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hmsrepl.exceptions import (
    EventsCleanedUpError,
    HmsReplError,
    NoSuchDatabaseError,
    NoSuchFunctionError,
    NoSuchPartitionError,
    NoSuchTableError,
)
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.hive_import.reader import StockMetastoreError, StockMetastoreReader
from hmsrepl.hive_source.allocations import Allocation, TxnAllocations
from hmsrepl.hive_source.messages import (
    ALIASES,
    BATCH_ALTER_SETTING,
    TRANSLATORS,
    BatchAlterError,
    HiveEvent,
    kind_of,
    translate,
)
from hmsrepl.hive_source.roots import StockRoots, StockRootsError
from hmsrepl.hive_source.txn_state import StockTxns
from hmsrepl.hive_source.write_dirs import write_id_files
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.events import EventType, NotificationEvent
from hmsrepl.metastore.file_capture import describe_files, list_data_files
from hmsrepl.metastore.listings import FileRecord
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.storage.rooted import OutsideRootsError
from hmsrepl.thrift.convert import function_from_thrift
from hmsrepl.thrift.idl import hms

log = logging.getLogger(__name__)

LISTENER_SETTING = "hive.metastore.transactional.event.listeners"
LISTENER_SETTINGS = (LISTENER_SETTING, "hive.metastore.event.listeners")
DB_NOTIFICATION_LISTENER = "org.apache.hive.hcatalog.listener.DbNotificationListener"
WAREHOUSE_SETTING = "hive.metastore.warehouse.dir"
CMROOT_SETTING = "hive.repl.cmrootdir"
#: Events fetched per ``get_next_notification`` call.
FETCH = 1_000
#: Translated events kept for the rest of a dump.
CACHED_EVENTS = 200_000
#: Files whose checksum is kept by (location, file, size, modification time) for later listings.
CACHED_CHECKSUMS = 1_000_000
#: The event types a stock source yields (others are left out when read).
TRANSLATED_TYPES = frozenset(str(kind) for kind in TRANSLATORS) | {str(kind) for kind, _ in ALIASES.values()}


class NotificationsDisabledError(HmsReplError):
    """The stock metastore keeps no notification log (no DbNotificationListener configured)."""


def _missing(exc: StockMetastoreError) -> bool:
    """Whether a failed read failed because the object does not exist (Hive's NoSuchObjectException)."""
    return type(exc.__cause__).__name__ == "NoSuchObjectException"


@dataclass(frozen=True)
class StockSourceConfig:
    """The stock metastore's warehouse and cmroot as the operator configured them (``roots``): recorded in
    dumps, trusted by loads as source roots."""

    uri: str
    warehouse: str
    cmroot: str
    cm_enabled: bool = False


class StockCatalog:
    """Catalog reads of the replication source interface, over the stock metastore's Thrift calls."""

    def __init__(self, reader: StockMetastoreReader, cm: ChangeManager, roots: StockRoots) -> None:
        self.reader, self.cm, self.roots = reader, cm, roots

    def readable(self, what: str, location: str | None) -> str | None:
        """``location`` if its files may be read (below the configured roots); every read of a stock
        source's data files asks this first."""
        if location:
            self.roots.check_location(what, location)
        return location

    def describe_data(self, table: Table, partition: Partition | None = None) -> list[str]:
        """Hive records no checksums: every file is read (a bootstrap copies each byte anyway)."""
        what = f"table '{table.qualified_name}'" + (f" partition {partition.values}" if partition else "")
        return describe_files(self.readable(what, (partition or table).sd.location), self.cm)

    def recorded_listings(
        self, table: Table, partitions: Sequence[Partition] = ()
    ) -> dict[str, dict[str, FileRecord]]:
        """None: Hive records no checksums (``describe_data``)."""
        return {}

    def get_database(self, name: str) -> Database:
        try:
            return self.reader.database(name)
        except StockMetastoreError as exc:
            if _missing(exc):
                raise NoSuchDatabaseError(name) from None
            raise

    def get_tables(self, db_name: str) -> list[str]:
        return self.reader.table_names(db_name)

    def get_table(self, db_name: str, table_name: str) -> Table:
        """The table with its constraints (Hive keeps them apart; a dump carries them in the table)."""
        table = self.table_only(db_name, table_name)
        constraints = self.reader.constraints(db_name, table_name)
        return table if constraints is None else table.model_copy(update={"constraints": constraints})

    def table_only(self, db_name: str, table_name: str) -> Table:
        """The table without its constraints: one call (what an event's translation needs of it)."""
        try:
            return self.reader.table(db_name, table_name)
        except StockMetastoreError as exc:
            if _missing(exc):
                raise NoSuchTableError(db_name, table_name) from None
            raise

    def get_table_objects(self, db_name: str, table_names: Sequence[str]) -> list[Table]:
        out = []
        for name in table_names:
            try:
                out.append(self.get_table(db_name, name))
            except NoSuchTableError:
                continue
        return out

    def get_partitions(self, db_name: str, table_name: str) -> list[Partition]:
        names = self.reader.partition_names(db_name, table_name)
        return [part for page in self.reader.partitions(db_name, table_name, names) for part in page]

    def get_partition(self, db_name: str, table_name: str, values: Sequence[str]) -> Partition:
        table = self.table_only(db_name, table_name)  # its partition keys: no constraints needed
        name = make_partition_name(table.partition_key_names, list(values))
        found = [p for page in self.reader.partitions(db_name, table_name, [name]) for p in page]
        if not found:
            raise NoSuchPartitionError(db_name, table_name, name)
        return found[0]

    def get_functions(self, db_name: str) -> list[str]:
        names = self.reader.call(f"the functions of '{db_name}'", "get_functions", db_name, "*")
        return sorted(name.lower() for name in names)

    def get_function(self, db_name: str, name: str) -> Function:
        try:
            raw = self.reader.call(f"function '{db_name}.{name}'", "get_function", db_name, name)
        except StockMetastoreError as exc:
            if _missing(exc):
                raise NoSuchFunctionError(db_name, name) from None
            raise
        return function_from_thrift(raw)


class StockLookups:
    """What translations read now (``hive_source.messages.Lookups``): listings and current objects.

    Listings are read in full for every data event (Hive's messages do not say what a write left), but a
    file listed before with the same size and modification time is not read again for its checksum: an
    append re-hashes only what it added, and the INSERT and ALTER_PARTITION a Hive writer logs per write cost
    one read of the new files. A file rewritten in place with the same size and time would keep its old
    checksum here; the load then refuses the copy (its checksum is verified), it never copies it silently.
    """

    def __init__(self, catalog: StockCatalog, cm: ChangeManager, allocations: TxnAllocations) -> None:
        self.catalog, self.cm, self.allocations = catalog, cm, allocations
        self._described: OrderedDict[tuple[str, str, int, float], str] = OrderedDict()

    def listing(self, location: str | None) -> list[str]:
        if not self.catalog.readable("an object of an event", location):
            return []
        assert location is not None
        statuses = list_data_files(self.cm.files, location)  # the operator's StockRoots and cmroot
        keys = [(location, s.uri, s.size, s.mtime) for s in statuses]
        new = [s for s, key in zip(statuses, keys, strict=True) if key not in self._described]
        for status, encoded in zip(new, describe_files(location, self.cm, new), strict=True):
            self._described[(location, status.uri, status.size, status.mtime)] = encoded
        out = [self._described[key] for key in keys]
        while len(self._described) > CACHED_CHECKSUMS:
            self._described.popitem(last=False)
        return out

    def database(self, db_name: str) -> Database | None:
        try:
            return self.catalog.get_database(db_name)
        except NoSuchDatabaseError:
            return None

    def table(self, db_name: str, table_name: str, *, constraints: bool = False) -> Table | None:
        try:
            if constraints:
                return self.catalog.get_table(db_name, table_name)
            return self.catalog.table_only(db_name, table_name)
        except NoSuchTableError:
            return None

    def partition(self, db_name: str, table_name: str, values: list[str]) -> Partition | None:
        try:
            return self.catalog.get_partition(db_name, table_name, values)
        except (NoSuchTableError, NoSuchPartitionError):
            return None

    def txn_allocations(self, txn_id: int, before_event_id: int) -> list[Allocation]:
        return self.allocations.of(txn_id, before_event_id)

    def write_files(self, db_name: str, table_name: str, write_id: int) -> list[dict[str, Any]]:
        """Each partition (or the table) where ``write_id`` left directories: a partitioned table's
        partitions are all listed, since Hive's messages do not say which ones a txn wrote.

        A commit is translated once for every policy, so it also names tables of databases no policy here
        reads: one outside the configured roots is not read (logged), its write keeps no files. A table of
        a replicated database cannot be there: its bootstrap and its CREATE_TABLE read the same location
        and refuse it."""
        try:
            return self._write_files(db_name, table_name, write_id)
        except (StockRootsError, OutsideRootsError) as exc:
            log.warning("write id %s of %s.%s is not read: %s", write_id, db_name, table_name, exc)
            return []

    def _write_files(self, db_name: str, table_name: str, write_id: int) -> list[dict[str, Any]]:
        table = self.table(db_name, table_name)
        if table is None:  # dropped since: its DROP_TABLE follows
            return []
        places: list[tuple[str | None, str | None]] = [(None, table.sd.location)]
        if table.partition_keys:
            parts = self.catalog.get_partitions(db_name, table_name)
            places = [
                (make_partition_name(table.partition_key_names, p.values), p.sd.location) for p in parts
            ]
        out = []
        for name, location in places:
            what = f"table '{db_name}.{table_name}'" + (f" partition {name}" if name else "")
            files = write_id_files(self.cm, self.catalog.readable(what, location), write_id)
            if files:
                out.append(
                    {
                        "db": db_name,
                        "table": table_name,
                        "partition": name,
                        "write_id": write_id,
                        "files": files,
                    }
                )
        return out


def fetch_events(reader: StockMetastoreReader, after: int, count: int) -> list[HiveEvent]:
    """Up to ``count`` events after ``after``; Hive numbers events without gaps, so a gap right after
    ``after`` means its cleaner removed them."""
    request = hms.NotificationEventRequest(lastEvent=after, maxEvents=count)
    response = reader.call(f"the events after {after}", "get_next_notification", request)
    events = [HiveEvent.from_thrift(e) for e in response.events or []]
    if events and events[0].event_id > after + 1:
        raise EventsCleanedUpError(after, events[0].event_id)
    return events


class StockEventLog:
    """``next_events`` over Hive's log: fetched in pages, filtered here, translated once per event."""

    def __init__(self, reader: StockMetastoreReader, lookups: StockLookups) -> None:
        self.reader, self.lookups = reader, lookups
        self._translated: OrderedDict[int, NotificationEvent | None] = OrderedDict()

    def current_event_id(self) -> int:
        return int(self.reader.call("its current event id", "get_current_notificationEventId").eventId)

    def _fetch(self, after: int, count: int) -> list[HiveEvent]:
        events = fetch_events(self.reader, after, count)
        self.lookups.allocations.record(after, events)  # the txns' write ids, for their commits
        return events

    def _translate(self, event: HiveEvent) -> NotificationEvent | None:
        if event.event_id not in self._translated:
            self._translated[event.event_id] = translate(event, self.lookups)
            while len(self._translated) > CACHED_EVENTS:
                self._translated.popitem(last=False)
        return self._translated[event.event_id]

    def next_events(
        self,
        after_event_id: int,
        max_events: int | None = None,
        *,
        db_name: str | None = None,
        table_name: str | None = None,
        event_types: Sequence[str] | None = None,
        to_event_id: int | None = None,
    ) -> list[NotificationEvent]:
        """Events with id > ``after_event_id`` (and <= ``to_event_id``) matching the filters, in id order.

        Hive filters nothing server-side before Hive 4, so pages of the whole log are read and filtered
        here; event types a stock source never yields (txn events) end the read at once.
        """
        if event_types is not None and not set(event_types) & TRANSLATED_TYPES:
            return []
        out: list[NotificationEvent] = []
        last = after_event_id
        while max_events is None or max_events <= 0 or len(out) < max_events:
            page = self._fetch(last, FETCH)
            for raw in page:
                if to_event_id is not None and raw.event_id > to_event_id:
                    return out
                last = raw.event_id
                if db_name is not None and raw.db_name != db_name.lower():
                    continue
                if table_name is not None and raw.table_name != table_name.lower():
                    continue
                if event_types is not None and kind_of(raw.event_type) not in event_types:
                    continue
                event = self._translate(raw)
                if event is not None:
                    out.append(event)
                    if max_events is not None and 0 < max_events <= len(out):
                        return out
            if len(page) < FETCH:
                break
        return out

    def next_renames_into(
        self,
        db_name: str,
        after_event_id: int,
        max_events: int | None = None,
        *,
        to_event_id: int | None = None,
    ) -> list[NotificationEvent]:
        """Every ALTER_TABLE event (Hive filters nothing server-side before Hive 4, and leaving none out keeps
        a page of ``max_events`` a page): the dump keeps those moving a table into ``db_name``."""
        return self.next_events(
            after_event_id, max_events, event_types=[EventType.ALTER_TABLE], to_event_id=to_event_id
        )


class NoStats:
    """Column statistics are not dumped from a stock source."""

    def dump_table(self, db_name: str, table_name: str) -> list[dict[str, Any]]:
        return []

    def dump_database(self, db_name: str) -> dict[str, list[dict[str, Any]]]:
        return {}


class StockHiveSource:
    """The replication source interface (``replication.source.ReplicationSource``) over a stock HMS."""

    def __init__(
        self,
        uri: str,
        *,
        warehouse: str | None = None,
        cmroot: str | None = None,
        external_roots: str | Sequence[str] | None = None,
        reader: StockMetastoreReader | None = None,
    ) -> None:
        """``warehouse``, ``cmroot`` (required) and ``external_roots``: the operator's roots of this source
        (``hive_source.roots``); the metastore's own settings are checked against them, never used."""
        self.roots = StockRoots.from_settings(uri, warehouse, cmroot, external_roots)
        self.reader = reader or StockMetastoreReader(uri)
        self.uri = uri
        self.roots.check_reported(WAREHOUSE_SETTING, self._setting(WAREHOUSE_SETTING))
        cm_on = (self._setting("hive.repl.cm.enabled") or "false").lower() == "true"
        if cm_on:  # its cmroot is read only when its change manager keeps files there
            self.roots.check_reported(CMROOT_SETTING, self._setting(CMROOT_SETTING), cmroot=True)
        self.config = StockSourceConfig(uri, self.roots.warehouse, self.roots.cmroot, cm_on)
        self.cm = ChangeManager(self.config.cmroot, enabled=cm_on, roots=self.roots.data_roots)
        self.catalog = StockCatalog(self.reader, self.cm, self.roots)
        allocations = TxnAllocations(lambda after, count: fetch_events(self.reader, after, count))
        self.events = StockEventLog(self.reader, StockLookups(self.catalog, self.cm, allocations))
        self.txns = StockTxns(self.reader, self.events.current_event_id, allocations)
        self.stats = NoStats()
        self._checked = False

    def _setting(self, name: str) -> str | None:
        """A setting of the stock metastore ("" when unset); None when the metastore refuses to say."""
        try:
            return str(self.reader.call(f"setting {name}", "get_config_value", name, "") or "")
        except StockMetastoreError as exc:
            if type(exc.__cause__).__name__ == "ConfigValSecurityException":
                return None
            raise

    def check_notifications(self) -> None:
        """Refuse a metastore that keeps no notification log: a dump of it would silently miss changes.

        Judged by its listener settings; a metastore that will not show them is given the benefit of the
        doubt (its log is then read as it is). Also refused: a Hive 4 that logs a whole ``alter_partitions``
        call as one ALTER_PARTITIONS event (its default), which would fail a later dump at such an event."""
        values = [self._setting(name) for name in LISTENER_SETTINGS]
        if all(value is None for value in values):
            return
        if "NotificationListener" not in " ".join(value or "" for value in values):
            raise NotificationsDisabledError(
                f"the metastore at {self.uri} keeps no notification log; set {LISTENER_SETTING}="
                f"{DB_NOTIFICATION_LISTENER} in its hive-site.xml and restart it, then take a bootstrap dump"
            )
        if (self._setting(BATCH_ALTER_SETTING) or "").strip().lower() == "true":
            raise BatchAlterError(
                f"the metastore at {self.uri} logs each alter_partitions call as one ALTER_PARTITIONS event "
                f"({BATCH_ALTER_SETTING}=true, Hive 4's default), which hmsrepl does not replay; set it to false "
                "in its hive-site.xml and restart it, then take a bootstrap dump"
            )

    def get_current_notification_event_id(self) -> int:
        if not self._checked:
            self.check_notifications()
            self._checked = True
        return self.events.current_event_id()

    def close(self) -> None:
        self.reader.close()
