"""Reading a stock Hive Metastore: the read calls every Hive version since 2.3 answers, in pages.

Only calls every release from Hive 2.3 to 4.2 answers (``get_all_databases``, ``get_table_req``,
``get_partition_names``, ``get_partitions_by_names``, ``get_functions``/``get_function``), so a Hive 2, 3 or 4
metastore can be read alike (Hive 4.2 no longer answers the older ``get_table``); partitions are fetched by name in pages, so a table of 100,000 partitions never arrives as one
message. The structs are converted into this product's model by the same code the Thrift server uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlparse

from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.thrift.convert import (
    database_from_thrift,
    function_from_thrift,
    partition_from_thrift,
    table_from_thrift,
)

DEFAULT_PAGE = 500


class StockMetastoreError(HmsReplError):
    """The stock metastore could not be reached or refused a read."""


class StockMetastoreReader:
    """A Thrift client of a stock Hive Metastore, opened on first use and closed by ``close``."""

    def __init__(self, uri: str, *, timeout_seconds: float = 120.0, user: str = "hive") -> None:
        parsed = urlparse(uri)
        if parsed.scheme != "thrift" or not parsed.hostname or not parsed.port:
            raise StockMetastoreError(f"'{uri}' is not a metastore URI; give thrift://HOST:PORT")
        self.uri = uri
        self.host, self.port = parsed.hostname, parsed.port
        self.timeout_ms = int(timeout_seconds * 1000)
        self.user = user
        self._client: Any = None

    def _conn(self) -> Any:
        if self._client is None:
            from thriftpy2.rpc import make_client

            from hmsrepl.thrift.idl import Service

            try:
                self._client = make_client(Service, self.host, self.port, timeout=self.timeout_ms)
                with contextlib.suppress(Exception):  # set_ugi is optional: a secured HMS derives the user
                    self._client.set_ugi(self.user, [])
            except Exception as exc:
                raise StockMetastoreError(
                    f"cannot reach the metastore at {self.uri}: {' '.join(str(exc).split())}; check that it "
                    "is running and the address is right"
                ) from exc
        return self._client

    def call(self, what: str, method: str, *args: Any) -> Any:
        """One Thrift call; ``what`` names what it fetches in the one-line error if it fails."""
        return self._call(what, method, *args)

    def _call(self, what: str, method: str, *args: Any) -> Any:
        try:
            return getattr(self._conn(), method)(*args)
        except StockMetastoreError:
            raise
        except Exception as exc:
            self.close()  # a broken connection is reopened by the next call
            raise StockMetastoreError(
                f"the metastore at {self.uri} failed to return {what}: {_message(exc)}"
            ) from exc

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def databases(self) -> list[str]:
        return sorted(self._call("its databases", "get_all_databases"))

    def database(self, name: str) -> Database:
        return database_from_thrift(self._call(f"database '{name}'", "get_database", name))

    def table_names(self, db_name: str) -> list[str]:
        return sorted(self._call(f"the tables of '{db_name}'", "get_all_tables", db_name))

    def table(self, db_name: str, table_name: str) -> Table:
        from hmsrepl.thrift.idl import hms

        request = hms.GetTableRequest(dbName=db_name, tblName=table_name)
        raw = self._call(f"table '{db_name}.{table_name}'", "get_table_req", request)
        return table_from_thrift(raw.table)

    def partition_names(self, db_name: str, table_name: str) -> list[str]:
        what = f"the partition names of '{db_name}.{table_name}'"
        return list(self._call(what, "get_partition_names", db_name, table_name, -1))

    def partitions(
        self, db_name: str, table_name: str, names: Sequence[str], page: int = DEFAULT_PAGE
    ) -> Iterator[list[Partition]]:
        """The named partitions, ``page`` at a time (one Thrift call each)."""
        for start in range(0, len(names), page):
            chunk = list(names[start : start + page])
            what = f"{len(chunk)} partitions of '{db_name}.{table_name}'"
            raw = self._call(what, "get_partitions_by_names", db_name, table_name, chunk)
            yield [partition_from_thrift(p, db_name, table_name) for p in raw]

    def functions(self, db_name: str) -> list[Function]:
        names = self._call(f"the functions of '{db_name}'", "get_functions", db_name, "*")
        return [
            function_from_thrift(self._call(f"function '{db_name}.{name}'", "get_function", db_name, name))
            for name in sorted(names)
        ]


def _message(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())
