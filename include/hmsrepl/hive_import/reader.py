"""Reading a stock Hive Metastore: the read calls every Hive version since 2.3 answers, in pages.

Only calls every release from Hive 2.3 to 4.2 answers (``get_all_databases``, ``get_table_req``,
``get_partition_names``, ``get_partitions_by_names``, ``get_functions``/``get_function``), so a Hive 2, 3 or 4
metastore can be read alike (Hive 4.2 no longer answers the older ``get_table``); partitions are fetched by name in pages, so a table of 100,000 partitions never arrives as one
message. Constraints are the exception: each release has its own calls for them, asked newest first. The structs are converted into this product's model by the same code the Thrift server uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlparse

from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore.constraints import TableConstraints
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.thrift.constraints import from_thrift, relative
from hmsrepl.thrift.convert import (
    CATALOG,
    database_from_thrift,
    function_from_thrift,
    partition_from_thrift,
    table_from_thrift,
)

DEFAULT_PAGE = 500


#: Hive's ClientCapability values (hive_metastore.thrift).
TEST_CAPABILITY, INSERT_ONLY_TABLES = 1, 2


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
        #: Calls this release answered with UNKNOWN_METHOD: not asked again.
        self._unknown: set[str] = set()

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

        # Hive 3 refuses an insert-only table to a client that does not say it reads them.
        capabilities = hms.ClientCapabilities(values=[TEST_CAPABILITY, INSERT_ONLY_TABLES])
        request = hms.GetTableRequest(dbName=db_name, tblName=table_name, capabilities=capabilities)
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

    def constraints(self, db_name: str, table_name: str) -> TableConstraints | None:
        """The table's constraints (None: it has none), in the fewest calls the release answers.

        Hive 4 answers ``get_all_table_constraints`` (one call); Hive 3 the six per-kind reads; Hive 2.3 only
        primary and foreign keys. A call the release does not know is answered with Thrift's UNKNOWN_METHOD
        and not asked again on this connection's reader."""
        from hmsrepl.thrift.idl import hms

        what = f"the constraints of '{db_name}.{table_name}'"
        if "get_all_table_constraints" not in self._unknown:
            request = hms.AllTableConstraintsRequest(dbName=db_name, tblName=table_name, catName=CATALOG)
            found = self._optional(what, "get_all_table_constraints", request)
            if found is not None:
                rows = found.allTableConstraints
                return _constraints(
                    db_name,
                    table_name,
                    rows.primaryKeys,
                    rows.foreignKeys,
                    rows.uniqueConstraints,
                    rows.notNullConstraints,
                    rows.defaultConstraints,
                    rows.checkConstraints,
                )
        names = {"catName": CATALOG, "db_name": db_name, "tbl_name": table_name}
        keys = self._optional(what, "get_primary_keys", hms.PrimaryKeysRequest(**names))
        foreign = self._optional(
            what,
            "get_foreign_keys",
            hms.ForeignKeysRequest(foreign_db_name=db_name, foreign_tbl_name=table_name, catName=CATALOG),
        )
        unique = self._optional(what, "get_unique_constraints", hms.UniqueConstraintsRequest(**names))
        not_null = self._optional(what, "get_not_null_constraints", hms.NotNullConstraintsRequest(**names))
        defaults = self._optional(what, "get_default_constraints", hms.DefaultConstraintsRequest(**names))
        checks = self._optional(what, "get_check_constraints", hms.CheckConstraintsRequest(**names))
        return _constraints(
            db_name,
            table_name,
            keys.primaryKeys if keys else None,
            foreign.foreignKeys if foreign else None,
            unique.uniqueConstraints if unique else None,
            not_null.notNullConstraints if not_null else None,
            defaults.defaultConstraints if defaults else None,
            checks.checkConstraints if checks else None,
        )

    def _optional(self, what: str, method: str, request: Any) -> Any:
        """``method``'s answer, or None when this release has no such call (remembered)."""
        if method in self._unknown:
            return None
        try:
            return self._call(what, method, request)
        except StockMetastoreError as exc:
            if not unknown_method(exc.__cause__):
                raise
            self._unknown.add(method)
            return None

    def functions(self, db_name: str) -> list[Function]:
        names = self._call(f"the functions of '{db_name}'", "get_functions", db_name, "*")
        return [
            function_from_thrift(self._call(f"function '{db_name}.{name}'", "get_function", db_name, name))
            for name in sorted(names)
        ]


def unknown_method(exc: BaseException | None) -> bool:
    """Whether a call failed because the server has no such method (an older Hive release)."""
    from thriftpy2.thrift import TApplicationException

    return isinstance(exc, TApplicationException) and exc.type == TApplicationException.UNKNOWN_METHOD


def _constraints(db_name: str, table_name: str, *rows: Sequence[Any] | None) -> TableConstraints | None:
    """Hive's constraint rows as the table's constraints, relative to its database; None if there are none."""
    found = relative(from_thrift(table_name, *(list(kind or []) for kind in rows)), db_name)
    return None if found.is_empty() else found


def _message(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())
