"""The notification log over Thrift, and the INSERT events clients fire."""

from __future__ import annotations

from typing import Any

from hmsrepl.exceptions import InvalidObjectError, NoSuchPartitionError
from hmsrepl.thrift.api.base import Area
from hmsrepl.thrift.hive3_insert import hive3_overwrote
from hmsrepl.thrift.idl import hms

# Partitions a connection's INSERTs declared and no alter took yet (a dynamic-partition load's, at most the
# partitions it writes at once); beyond this the oldest is forgotten and its alter lists it.
MAX_DECLARED = 1024


class NotificationApi(Area):
    """Reads of the notification log (authorized per caller) and ``fire_listener_event``."""

    def get_next_notification(self, rqst: Any) -> Any:
        max_events = rqst.maxEvents if rqst.maxEvents and rqst.maxEvents > 0 else None
        skip = set(rqst.eventTypeSkipList or [])
        events: list[Any] = []
        last = rqst.lastEvent
        while True:
            page = self.store.get_next_notification(last, max_events, caller=self.caller)
            events.extend(e for e in page if e.event_type not in skip)
            if not skip or not page or max_events is None or len(events) >= max_events:
                break
            last = page[-1].event_id
        if max_events is not None:
            events = events[:max_events]
        return hms.NotificationEventResponse(
            events=[
                hms.NotificationEvent(
                    eventId=e.event_id,
                    eventTime=e.event_time,
                    eventType=e.event_type,
                    dbName=e.db_name,
                    tableName=e.table_name,
                    message=e.message,
                    messageFormat=e.message_format,
                    catName=e.cat_name,
                )
                for e in events
            ]
        )

    def get_current_notificationEventId(self) -> Any:
        return hms.CurrentNotificationEventId(
            eventId=self.store.get_current_notification_event_id(caller=self.caller)
        )

    def get_notification_events_count(self, rqst: Any) -> Any:
        count = self.store.get_notification_events_count(
            rqst.fromEventId, rqst.dbName, rqst.toEventId, caller=self.caller
        )
        if rqst.limit is not None and rqst.limit > 0:
            count = min(count, rqst.limit)
        return hms.NotificationEventsCountResponse(eventsCount=count)

    def fire_listener_event(self, rqst: Any) -> Any:
        """An INSERT notification from a client that wrote files itself (Spark's Hive client, with
        ``hive.metastore.dml.events``).

        The metastore records the named files, reading only those it has not recorded yet
        (``CatalogService.insert``). Into a partition, Hive fires it before the alter_partition of the same
        append, which is then declared by it (``alter_partitions``). Into a table, after the alter_table: on a
        connection's first append that alter listed the table, so the INSERT logs an empty change and names
        the files with their recorded checksums; from then on the connection declares its alters
        (``alter_table``) and the INSERT records the files.

        Hive 4 may send several partitions' INSERTs in one call (``insertDatas``), each naming its partition
        (``partitionVal``); each is recorded as one INSERT would be, and the answer lists their event ids.
        """
        data = rqst.data
        if data is not None and data.insertDatas is not None:
            ids: list[int] = []
            for insert in data.insertDatas:
                if not insert.partitionVal:
                    raise InvalidObjectError(
                        f"fire_listener_event on '{rqst.dbName}.{rqst.tableName}': each of several insert "
                        "events (insertDatas) must name its partition (partitionVal)"
                    )
                ids.extend(self._insert(rqst.dbName, rqst.tableName, list(insert.partitionVal), insert))
            return hms.FireEventResponse(eventIds=ids)
        insert = data.insertData if data is not None else None
        if insert is None:
            raise InvalidObjectError(
                "fire_listener_event: only insert events (insertData or insertDatas) are supported"
            )
        return hms.FireEventResponse(
            eventIds=self._insert(rqst.dbName, rqst.tableName, rqst.partitionVals, insert)
        )

    def _insert(
        self, db_name: str, table_name: str, partition_vals: list[str] | None, insert: Any
    ) -> list[int]:
        """One INSERT into a table or partition: the id of the event it logged (none for a partition not
        added yet)."""
        files = list(insert.filesAdded or [])
        hive3 = insert.filesAddedChecksumV3 is not None or insert.subDirectoryList is not None
        if hive3 or not files:  # a Hive 3 client: its field 2 is the list of files
            files = list(insert.filesAddedChecksum or []) or files
        # Hive 3's 'replace' flag (field 1) cannot be read in the 2.3 shape: it is told from the location.
        replace = insert.filesAdded is None and hive3_overwrote(
            self.catalog, db_name, table_name, partition_vals, files
        )
        before = self.store.get_current_notification_event_id()
        pending = self._declared()
        key = (db_name.lower(), table_name.lower(), tuple(partition_vals or ()))
        pending.pop(key, None)
        try:
            self.catalog.insert(
                db_name,
                table_name,
                partition_vals or None,
                new_files=files or None,
                replace=replace,
                gather_stats=True,
            )
        except NoSuchPartitionError:
            # Spark's Hive client reports an overwrite into a new partition before it adds the partition;
            # the ADD_PARTITION that follows lists the files, so there is nothing to log yet.
            return []
        self._local.declares = True
        if partition_vals:  # the alter_partition Hive sends next changes no data of its own
            pending[key] = None
            while len(pending) > MAX_DECLARED:
                pending.pop(next(iter(pending)))
        events = self.store.events.next_events(before, db_name=db_name, table_name=table_name)
        return [e.event_id for e in events if e.event_type == "INSERT"][-1:]
