"""What a REPL DUMP reads from its source: the interface both source kinds implement.

An hmsrepl metastore (``metastore.Metastore``) implements it natively; a stock Hive Metastore does through
``hive_source.source.StockHiveSource`` (Thrift reads and Hive's notification log, translated into this
product's event bodies). The dump engine depends on this protocol only, so the source kind is a setting of a
replication (``--source-db-url thrift://host:port``), not a fork of the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.events import NotificationEvent
from hmsrepl.metastore.listings import FileRecord
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.metastore.transactions import ReplicationSnapshot


class SourceConfig(Protocol):
    """Where the source's data lives: recorded in dumps, and the roots a load may read from."""

    @property
    def warehouse(self) -> str: ...

    @property
    def cmroot(self) -> str: ...


class SourceCatalog(Protocol):
    def get_database(self, name: str) -> Database: ...

    def get_tables(self, db_name: str) -> list[str]: ...

    def get_table(self, db_name: str, table_name: str) -> Table: ...

    def get_table_objects(self, db_name: str, table_names: Sequence[str]) -> list[Table]: ...

    def get_partitions(self, db_name: str, table_name: str) -> list[Partition]: ...

    def get_partition(self, db_name: str, table_name: str, values: Sequence[str]) -> Partition: ...

    def get_functions(self, db_name: str) -> list[str]: ...

    def get_function(self, db_name: str, name: str) -> Function: ...

    def describe_data(self, table: Table, partition: Partition | None = None) -> list[str]:
        """Encoded files (``fileuri#checksum#cmroot#subdir``) of the object's location, for a bootstrap."""
        ...

    def recorded_listings(
        self, table: Table, partitions: Sequence[Partition] = ()
    ) -> Mapping[str, Mapping[str, FileRecord]]:
        """Recorded files by location and relative path: what a bootstrap on Spark need not read again."""
        ...


class SourceEvents(Protocol):
    def next_events(
        self,
        after_event_id: int,
        max_events: int | None = None,
        *,
        db_name: str | None = None,
        table_name: str | None = None,
        event_types: Sequence[str] | None = None,
        to_event_id: int | None = None,
    ) -> list[NotificationEvent]: ...

    def next_renames_into(
        self,
        db_name: str,
        after_event_id: int,
        max_events: int | None = None,
        *,
        to_event_id: int | None = None,
    ) -> list[NotificationEvent]:
        """ALTER_TABLE events that may rename a table of another database into ``db_name`` (a superset, in
        id order, at most ``max_events``): the dump parses them (``replication.crossing``)."""
        ...


class SourceTxns(Protocol):
    def replication_snapshot(self, db_name: str) -> ReplicationSnapshot: ...

    def open_txns_writing(self, db_name: str) -> list[int]: ...

    def txn_states(self, txn_ids: Sequence[int]) -> dict[int, str]: ...

    def abort_txns(self, txn_ids: Sequence[int], *, reason: str) -> Any: ...


class SourceStats(Protocol):
    def dump_table(self, db_name: str, table_name: str) -> list[dict[str, Any]]: ...

    def dump_database(self, db_name: str) -> dict[str, list[dict[str, Any]]]: ...


class ReplicationSource(Protocol):
    """A metastore a dump reads: catalog, notification log, txn snapshot, statistics, change manager."""

    # Read-only members (properties), so an implementation may hold more specific types.
    @property
    def config(self) -> SourceConfig: ...

    @property
    def catalog(self) -> SourceCatalog: ...

    @property
    def events(self) -> SourceEvents: ...

    @property
    def txns(self) -> SourceTxns: ...

    @property
    def stats(self) -> SourceStats: ...

    @property
    def cm(self) -> ChangeManager: ...

    def get_current_notification_event_id(self) -> int: ...
