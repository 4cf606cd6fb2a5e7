"""Hive 3/4 catalog-qualified names: ``@hive#db`` in database-name arguments, ``catName`` in request structs.

Hive 3.1+ clients prepend the catalog to every database name they pass as a plain string argument
(``@<catalog>#<db>``; ``@<catalog>#`` alone means no database, ``@<catalog>#!`` the empty name) and set
``catName`` in request structs. This metastore has one catalog, Hive's default ``hive``: qualified names in
it are unwrapped before the handler sees them, and any other catalog is refused naming the one that exists.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, MutableMapping
from typing import Any

from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.thrift.idl import Service

CATALOG = "hive"
MARKER, SEPARATOR, EMPTY = "@", "#", "!"

# String arguments that carry a database name (or database pattern) in Hive's IDL.
_DB_ARGUMENTS = {"db_name", "dbname", "dbName", "db_patterns"}
# Methods whose database-name argument has a generic name.
_SPECIAL = {"get_database": "name", "drop_database": "name", "get_databases": "pattern"}
# Struct fields naming a catalog, and struct fields naming a database (Hive 4 qualifies some, e.g.
# GetPartitionsByNamesRequest.db_name).
_CATALOG_FIELDS = ("catName", "catalogName")
_DB_FIELDS = ("dbName", "db_name")


def parse_db_name(value: str | None) -> str | None:
    """``@hive#sales`` -> ``sales``; an unqualified name is returned as it is."""
    if not value or not value.startswith(MARKER):
        return value
    catalog, sep, db = value[1:].partition(SEPARATOR)
    if not sep:
        raise NoSuchObjectError(
            f"database name '{value}' starts with '@' but has no '#': Hive's qualified form is @catalog#database"
        )
    check_catalog(catalog)
    if db == EMPTY:
        return ""
    return db or None


def check_catalog(catalog: str | None) -> None:
    if catalog and catalog.lower() != CATALOG:
        raise NoSuchObjectError(
            f"catalog '{catalog}' does not exist; this metastore has one catalog, '{CATALOG}': use it or none"
        )


def check_struct(value: Any) -> None:
    """A struct's catalog fields name ours; a qualified database name in it is unwrapped in place."""
    for name in _CATALOG_FIELDS:
        check_catalog(getattr(value, name, None))
    for name in _DB_FIELDS:
        db = getattr(value, name, None)
        if isinstance(db, str) and db.startswith(MARKER):
            setattr(value, name, parse_db_name(db))


def _qualified(method: Callable[..., Any], positions: list[int], structs: list[int]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any) -> Any:
        if positions or structs:
            args_list = list(args)
            for i in positions:
                if i < len(args_list) and isinstance(args_list[i], str):
                    args_list[i] = parse_db_name(args_list[i])
            for i in structs:
                if i < len(args_list) and args_list[i] is not None:
                    check_struct(args_list[i])
            args = tuple(args_list)
        return method(*args)

    return call


def accept_qualified_names(methods: MutableMapping[str, Callable[..., Any]]) -> None:
    """Wrap every method (of a handler's dispatch table) that takes a database name or a struct with a catalog
    field."""
    for name in Service.thrift_services:
        method = methods.get(name)
        if method is None:
            continue
        spec = list(getattr(Service, f"{name}_args").thrift_spec.values())
        db_args = {_SPECIAL[name]} if name in _SPECIAL else _DB_ARGUMENTS
        positions = [i for i, entry in enumerate(spec) if entry[1] in db_args]
        structs = [
            i
            for i, entry in enumerate(spec)
            if len(entry) > 3
            and isinstance(entry[2], type)
            and any(f in _fields(entry[2]) for f in (*_CATALOG_FIELDS, *_DB_FIELDS))
        ]
        if positions or structs:
            methods[name] = _qualified(method, positions, structs)


def _fields(cls: type) -> set[str]:
    spec = getattr(cls, "thrift_spec", None) or {}
    return {entry[1] for entry in spec.values()}
