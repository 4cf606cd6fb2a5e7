"""Databases over Thrift."""

from __future__ import annotations

from typing import Any

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.thrift import convert
from hmsrepl.thrift.api.base import Area


class DatabaseApi(Area):
    """create, read, alter and drop databases."""

    def create_database(self, database: Any) -> None:
        self.catalog.create_database(convert.database_from_thrift(database))

    def get_database(self, name: str) -> Any:
        return self.reads.database(name, to=convert.database_to_thrift)

    def drop_database(self, name: str, delete_data: bool, cascade: bool) -> None:
        self.catalog.drop_database(name, delete_data=bool(delete_data), cascade=bool(cascade))

    def get_databases(self, pattern: str) -> list[str]:
        return self.catalog.get_databases(pattern)

    def get_all_databases(self) -> list[str]:
        return self.catalog.get_databases()

    def alter_database(self, dbname: str, db: Any) -> None:
        self.catalog.alter_database(dbname, convert.database_from_thrift(db))

    def get_database_req(self, request: Any) -> Any:
        if not request.name:
            raise InvalidObjectError("get_database_req without a database name; set GetDatabaseRequest.name")
        return self.get_database(request.name)
