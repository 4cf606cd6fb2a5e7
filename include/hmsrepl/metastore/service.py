"""The metastore as one object: catalog, transactions, notification API and change manager on one database.

This is what the Thrift server serves and what in-process users (tests, the replication engine, Spark
helpers) call directly. In-process calls skip the notification API's authorization, as Hive's embedded
metastore does; a remote caller's user name is passed as ``caller`` and must be an admin/proxy user.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import astuple

from sqlalchemy import Engine

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import AccessDeniedError, AlreadyExistsError, NoSuchDatabaseError
from hmsrepl.metastore import listings
from hmsrepl.metastore.catalog import DEFAULT_DB, CatalogService
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.database import make_engine, upgrade_schema
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.events import NotificationEvent
from hmsrepl.metastore.intents import IntentRunResult
from hmsrepl.metastore.locks import LockService
from hmsrepl.metastore.model import Database, Table
from hmsrepl.metastore.spark_stats_sync import SparkStatsSync
from hmsrepl.metastore.statistics import StatisticsService
from hmsrepl.metastore.transactions import TransactionService

log = logging.getLogger(__name__)

RECONCILE_BATCH = 200  # objects one housekeeping pass lists at most (tens of ms each at 10,000 files)


def data_roots(config: MetastoreConfig) -> list[str]:
    """Where this metastore's files may live, besides cmroot: what its change manager may recycle and pin."""
    return [config.warehouse, *config.managed_roots, *config.external_roots, config.trash_root]


class Metastore:
    def __init__(self, config: MetastoreConfig, *, engine: Engine | None = None) -> None:
        self.config = config
        self.engine = engine or make_engine(config.db_url)
        self.events = EventLog(
            self.engine, compress=config.compress_events, compress_min_bytes=config.compress_min_bytes
        )
        self.cm = ChangeManager(config.cmroot, enabled=config.cm_enabled, roots=data_roots(config))
        self.catalog = CatalogService.for_config(self.events, self.cm, config)
        self.catalog.transactional_truncate = self._truncate_transactional
        self.txns = TransactionService(self.events, self.catalog, timeout_seconds=config.txn_timeout_seconds)
        self.locks = LockService(self.events, timeout_seconds=config.txn_timeout_seconds)
        self.stats = StatisticsService(self.catalog)
        self.spark_stats = SparkStatsSync(self.catalog, self.stats)

    @classmethod
    def open(cls, config: MetastoreConfig | None = None, *, create_schema: bool = True) -> Metastore:
        """Open a metastore, creating or upgrading its schema and the default database when asked.

        With the schema known current, file work left by a crash of an earlier process (pending intents)
        is completed here, so a restarted metastore owes nothing before it serves.
        """
        config = config or MetastoreConfig()
        if create_schema:
            upgrade_schema(config.db_url)
        store = cls(config)
        if create_schema:
            store.ensure_default_database()
            try:
                store.complete_file_intents(lease_seconds=0)
            except Exception:  # a bad cmroot must not keep the metastore from starting; housekeeping retries
                log.exception("completing pending file intents failed; housekeeping will retry")
        return store

    def ensure_default_database(self) -> None:
        try:
            self.catalog.get_database(DEFAULT_DB)
        except NoSuchDatabaseError:
            default = Database(
                name=DEFAULT_DB, description="Default database", location_uri=self.config.warehouse
            )
            with contextlib.suppress(AlreadyExistsError):  # another instance created it first
                self.catalog.create_database(default)

    def close(self) -> None:
        self.engine.dispose()

    # -- notification API --------------------------------------------------------------------------------
    def authorize_notification_api(self, caller: str | None) -> None:
        """Remote callers must be admin/proxy users; ``None`` means an in-process (embedded) caller."""
        if caller is None or not self.config.notification_api_auth:
            return
        if caller not in self.config.admin_users:
            raise AccessDeniedError(
                f"user '{caller}' may not read the notification log; only admin/proxy users "
                f"{sorted(self.config.admin_users)} may (setting HMSREPL_ADMIN_USERS)"
            )

    def get_next_notification(
        self,
        last_event_id: int,
        max_events: int | None = None,
        *,
        db_name: str | None = None,
        table_name: str | None = None,
        event_types: Sequence[str] | None = None,
        caller: str | None = None,
    ) -> list[NotificationEvent]:
        self.authorize_notification_api(caller)
        return self.events.next_events(
            last_event_id, max_events, db_name=db_name, table_name=table_name, event_types=event_types
        )

    def get_current_notification_event_id(self, *, caller: str | None = None) -> int:
        self.authorize_notification_api(caller)
        return self.events.current_event_id()

    def get_notification_events_count(
        self, from_event_id: int, db_name: str, to_event_id: int | None = None, *, caller: str | None = None
    ) -> int:
        self.authorize_notification_api(caller)
        return self.events.count_events(from_event_id, db_name, to_event_id)

    def cleanup_events(self, now: float | None = None) -> int:
        return self.events.cleanup(self.config.event_ttl_seconds, now)

    def _truncate_transactional(
        self, table: Table, partition_names: Sequence[str] | None, within: tuple[int, int] | None = None
    ) -> list[int]:
        from hmsrepl.acid.truncate import truncate_insert_only  # hmsrepl.acid builds on this module

        return truncate_insert_only(self, table, partition_names, within)

    def complete_file_intents(
        self, lease_seconds: float | None = None, *, include_parked: bool = False
    ) -> IntentRunResult:
        """Finish file work that committed changes still owe (see ``metastore.intents``).

        ``lease_seconds`` (default ``intent_lease_seconds``) leaves alone intents a live request started
        on recently; 0 takes every pending intent (after a restart). Parked intents (work that can never
        succeed as it is) are tried again only with ``include_parked``, once the operator fixed the cause.
        """
        lease = self.config.intent_lease_seconds if lease_seconds is None else lease_seconds
        return self.catalog.intents.run_pending(lease, include_parked=include_parked)

    def reconcile_listings(self, settle_seconds: float = 1.0, limit: int = RECONCILE_BATCH) -> int:
        """List the objects declared writes left unlisted for ``settle_seconds`` or more, oldest first, and
        log what no writer named (``CatalogService.reconcile_listing``); returns the events logged.

        Housekeeping calls this: one listing per object per pass, whatever number of appends marked it.
        One object failing (its location unreadable) is logged and left marked; the others go on.
        """
        before_ns = time.time_ns() - int(settle_seconds * 1e9)
        with self.events.reader() as conn:
            due = listings.due_unlisted(conn, before_ns, limit)
        logged = 0
        for key in due:
            try:
                logged += self.catalog.reconcile_listing(key)
            except Exception:  # one bad location must not stop the others
                log.exception("reconciling the listing of table id %s, partition id %s failed", *astuple(key))
        return logged

    def cleanup_cmroot(self, now: float | None = None) -> int:
        return self.cm.cleanup(self.config.cm_retention_seconds, now).deleted
