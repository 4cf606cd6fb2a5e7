"""Functions: created, read and dropped, each change committed with its event."""

from __future__ import annotations

import time

from sqlalchemy import delete, insert, select

from hmsrepl.exceptions import AlreadyExistsError, NoSuchFunctionError
from hmsrepl.metastore.catalog.core import CatalogFamily
from hmsrepl.metastore.catalog.rows import _snapshot
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.model import Function
from hmsrepl.metastore.names import check_identifier
from hmsrepl.metastore.patterns import matches
from hmsrepl.metastore.payloads import FunctionBody
from hmsrepl.metastore.schema import funcs


class FunctionCatalog(CatalogFamily):
    """A database's functions."""

    def create_function(self, function: Function) -> Function:
        check_identifier(function.function_name, "function")
        function = function.model_copy(update={"create_time": function.create_time or int(time.time())})
        with self.events.transaction() as tx:
            db_id = self.core.db_id(tx.conn, function.db_name)
            if tx.conn.execute(
                select(funcs.c.func_id).where(
                    funcs.c.db_id == db_id, funcs.c.func_name == function.function_name
                )
            ).first():
                raise AlreadyExistsError(
                    f"function '{function.db_name}.{function.function_name}' already exists"
                )
            tx.conn.execute(
                insert(funcs).values(
                    db_id=db_id, func_name=function.function_name, doc=function.model_dump_json()
                )
            )
            tx.emit(
                EventType.CREATE_FUNCTION, function.db_name, None, FunctionBody(function=_snapshot(function))
            )
        return function

    def get_function(self, db_name: str, function_name: str) -> Function:
        with self.events.reader() as conn:
            db_id = self.core.db_id(conn, db_name.lower())
            row = conn.execute(
                select(funcs.c.doc).where(funcs.c.db_id == db_id, funcs.c.func_name == function_name.lower())
            ).first()
        if row is None:
            raise NoSuchFunctionError(db_name.lower(), function_name.lower())
        return Function.model_validate_json(row.doc)

    def get_functions(self, db_name: str, pattern: str | None = None) -> list[str]:
        with self.events.reader() as conn:
            db_id = self.core.db_id(conn, db_name.lower())
            names = conn.execute(
                select(funcs.c.func_name).where(funcs.c.db_id == db_id).order_by(funcs.c.func_name)
            ).scalars()
            return [name for name in names if matches(pattern, name)]

    def drop_function(self, db_name: str, function_name: str) -> None:
        function = self.get_function(db_name, function_name)
        with self.events.transaction() as tx:
            db_id = self.core.db_id(tx.conn, function.db_name)
            count = tx.conn.execute(
                delete(funcs).where(funcs.c.db_id == db_id, funcs.c.func_name == function.function_name)
            ).rowcount
            if count == 0:
                raise NoSuchFunctionError(function.db_name, function.function_name)
            tx.emit(
                EventType.DROP_FUNCTION, function.db_name, None, FunctionBody(function=_snapshot(function))
            )
