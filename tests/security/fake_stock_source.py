"""A Thrift server that answers as a hostile stock Hive Metastore would: its own choice of roots and
locations, everything else as a minimal Hive 2.3 with its notification log turned on.

It holds one database ``sales`` with one unpartitioned table ``loot`` at a location it chooses, and answers
``get_config_value`` from a dict it is given (what an attacker reports as its warehouse and cmroot).
Every call is recorded, so a test can tell what was asked.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from thriftpy2.thrift import TApplicationException

from hmsrepl.thrift.idl import Service, hms
from tests.servers import free_port

LISTENER = "org.apache.hive.hcatalog.listener.DbNotificationListener"
TEXT_IN = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
LAZY_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"


@dataclass
class HostileMetastore:
    """The answers: ``settings`` for ``get_config_value``; the database's and table's locations."""

    settings: dict[str, str]
    db_location: str
    table_location: str
    calls: list[str] = field(default_factory=list)
    managed: bool = False  # the table as a managed one (an import with copy reads managed tables' files)

    def _record(self, name: str) -> None:
        self.calls.append(name)

    def set_ugi(self, user: str, groups: list[str]) -> list[str]:
        self._record("set_ugi")
        return [user]

    def get_config_value(self, name: str, default_value: str) -> str:
        self._record(f"get_config_value {name}")
        defaults = {"hive.metastore.transactional.event.listeners": LISTENER}
        return self.settings.get(name, defaults.get(name, default_value))

    def get_current_notificationEventId(self) -> Any:
        self._record("get_current_notificationEventId")
        return hms.CurrentNotificationEventId(eventId=0)

    def get_next_notification(self, request: Any) -> Any:
        self._record("get_next_notification")
        return hms.NotificationEventResponse(events=[])

    # Constraints as Hive 2.3 answers them: primary and foreign keys (none here); the later releases' calls
    # (and write ids, Hive 3's) are unknown to it (Thrift's UNKNOWN_METHOD).
    def get_primary_keys(self, request: Any) -> Any:
        return hms.PrimaryKeysResponse(primaryKeys=[])

    def get_foreign_keys(self, request: Any) -> Any:
        return hms.ForeignKeysResponse(foreignKeys=[])

    def __getattr__(self, name: str) -> Any:
        if (name.startswith("get_") and name.endswith("constraints")) or name == "get_valid_write_ids":

            def unknown(*args: Any) -> Any:
                raise TApplicationException(
                    TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{name}'"
                )

            return unknown
        raise AttributeError(name)

    def get_all_databases(self) -> list[str]:
        return ["sales"]

    def get_database(self, name: str) -> Any:
        self._record(f"get_database {name}")
        if name != "sales":
            raise hms.NoSuchObjectException(message=f"database {name}")
        return hms.Database(name="sales", description=None, locationUri=self.db_location, parameters={})

    def get_all_tables(self, db_name: str) -> list[str]:
        self._record(f"get_all_tables {db_name}")
        return ["loot"]

    def get_table(self, db_name: str, table_name: str) -> Any:
        self._record(f"get_table {db_name}.{table_name}")
        if (db_name, table_name) != ("sales", "loot"):
            raise hms.NoSuchObjectException(message=f"table {db_name}.{table_name}")
        sd = hms.StorageDescriptor(
            cols=[hms.FieldSchema(name="v", type="string", comment=None)],
            location=self.table_location,
            inputFormat=TEXT_IN,
            outputFormat=TEXT_OUT,
            compressed=False,
            numBuckets=-1,
            serdeInfo=hms.SerDeInfo(name=None, serializationLib=LAZY_SERDE, parameters={}),
            bucketCols=[],
            sortCols=[],
            parameters={},
        )
        return hms.Table(
            tableName="loot",
            dbName="sales",
            owner="mallory",
            createTime=1,
            lastAccessTime=0,
            retention=0,
            sd=sd,
            partitionKeys=[],
            parameters={} if self.managed else {"EXTERNAL": "TRUE"},
            tableType="MANAGED_TABLE" if self.managed else "EXTERNAL_TABLE",
        )

    def get_table_req(self, request: Any) -> Any:
        """The request form every release answers (Hive 4.2 answers no other), as ``get_table``."""
        return hms.GetTableResult(table=self.get_table(request.dbName, request.tblName))

    def get_partition_names(self, db_name: str, table_name: str, max_parts: int) -> list[str]:
        return []

    def get_partitions_by_names(self, db_name: str, table_name: str, names: list[str]) -> list[Any]:
        return []

    def get_functions(self, db_name: str, pattern: str) -> list[str]:
        return []


@contextmanager
def hostile_metastore(answers: HostileMetastore) -> Iterator[str]:
    """Serve ``answers`` on a loopback port; yields its ``thrift://`` URI."""
    from thriftpy2.rpc import make_server

    port = free_port()
    server = make_server(Service, answers, "127.0.0.1", port, client_timeout=30_000)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while True:  # serve() listens in the thread: wait until it accepts
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    try:
        yield f"thrift://127.0.0.1:{port}"
    finally:
        listening = getattr(server.trans, "sock", None)
        if listening is not None:  # wakes the thread blocked in accept()
            with contextlib.suppress(OSError):
                listening.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(timeout=5)
        assert not thread.is_alive(), "the fake metastore did not stop"
