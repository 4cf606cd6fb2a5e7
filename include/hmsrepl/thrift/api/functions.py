"""Functions over Thrift."""

from __future__ import annotations

from typing import Any

from hmsrepl.thrift import convert
from hmsrepl.thrift.api.base import Area
from hmsrepl.thrift.idl import hms


class FunctionApi(Area):
    """A database's functions."""

    def create_function(self, func: Any) -> None:
        self.catalog.create_function(convert.function_from_thrift(func))

    def drop_function(self, db_name: str, func_name: str) -> None:
        self.catalog.drop_function(db_name, func_name)

    def get_functions(self, db_name: str, pattern: str) -> list[str]:
        return self.catalog.get_functions(db_name, pattern)

    def get_function(self, db_name: str, func_name: str) -> Any:
        return convert.function_to_thrift(self.catalog.get_function(db_name, func_name))

    def get_all_functions(self) -> Any:
        functions = [
            convert.function_to_thrift(self.catalog.get_function(db, name))
            for db in self.catalog.get_databases()
            for name in self.catalog.get_functions(db)
        ]
        return hms.GetAllFunctionsResponse(functions=functions)
