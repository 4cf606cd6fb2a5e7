"""Serves Hive Metastore Thrift calls from a ``Metastore``.

The methods live in API areas (``thrift.api``: databases, tables, partitions, ...), one class each,
found by name through one dispatch table. Each method translates structs, calls the core, and translates back; errors are mapped onto whichever
exception types the called method declares (a client only understands those), so a missing table is a
NoSuchObjectException where declared and a MetaException with the same message elsewhere. The connection's
user is its Kerberos principal's short name when the port authenticates (``set_ugi`` may only narrow it, or
switch to a user the principal may impersonate), else whatever ``set_ugi`` claims (loopback-only servers).
"""

from __future__ import annotations

import functools
import logging
import types
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy.exc import DataError
from thriftpy2.thrift import TApplicationException

from hmsrepl.cache import MetadataCache
from hmsrepl.exceptions import (
    AlreadyExistsError,
    InvalidInputError,
    InvalidObjectError,
    InvalidOperationError,
    InvalidPartitionValueError,
    MetastoreError,
    NoSuchLockError,
    NoSuchObjectError,
    NoSuchTxnError,
    TxnAbortedError,
    TxnOpenError,
)
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.repl_source import RenameAcrossReplicationSourceError
from hmsrepl.thrift.api.base import Area, HandlerContext
from hmsrepl.thrift.api.constraints import ConstraintApi
from hmsrepl.thrift.api.databases import DatabaseApi
from hmsrepl.thrift.api.functions import FunctionApi
from hmsrepl.thrift.api.notifications import NotificationApi
from hmsrepl.thrift.api.partition_reads import EncodedStructs, PartitionReadApi
from hmsrepl.thrift.api.partition_specs import PartitionSpecApi
from hmsrepl.thrift.api.partitions import PartitionWriteApi
from hmsrepl.thrift.api.privileges import PrivilegeApi
from hmsrepl.thrift.api.requests import RequestFormApi
from hmsrepl.thrift.api.session import SessionApi
from hmsrepl.thrift.api.statistics import StatisticsApi
from hmsrepl.thrift.api.tables import TableApi
from hmsrepl.thrift.api.transactions import TransactionApi
from hmsrepl.thrift.catalogs import accept_qualified_names
from hmsrepl.thrift.idl import Service

__all__ = ["DISPATCH", "EncodedStructs", "ErrorMappingDispatcher", "MetastoreHandler", "to_thrift_error"]

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # annotations only: the server hands the handler its security settings and peers
    from hmsrepl.thrift.auth import Peer, ThriftSecurity

# Preferred Thrift exception per domain error, in order; the first one the method declares is used.
_PREFERENCES: list[tuple[type[BaseException], tuple[str, ...]]] = [
    (NoSuchLockError, ("NoSuchLockException", "NoSuchObjectException", "MetaException")),
    (TxnOpenError, ("TxnOpenException", "InvalidOperationException", "MetaException")),
    (InvalidInputError, ("InvalidInputException", "InvalidObjectException", "MetaException")),
    (NoSuchTxnError, ("NoSuchTxnException", "NoSuchObjectException", "MetaException")),
    (TxnAbortedError, ("TxnAbortedException", "NoSuchTxnException", "MetaException")),
    (
        NoSuchObjectError,
        ("NoSuchObjectException", "UnknownTableException", "UnknownDBException", "MetaException"),
    ),
    (AlreadyExistsError, ("AlreadyExistsException", "MetaException")),
    (RenameAcrossReplicationSourceError, ("MetaException", "InvalidOperationException")),  # as Hive answers
    (InvalidPartitionValueError, ("MetaException", "InvalidObjectException")),
    (InvalidObjectError, ("InvalidObjectException", "MetaException", "InvalidOperationException")),
    (InvalidOperationError, ("InvalidOperationException", "MetaException", "InvalidObjectException")),
]
_FALLBACK = ("MetaException", "InvalidOperationException", "InvalidObjectException", "NoSuchObjectException")


def _declared_exceptions(method: str) -> dict[str, type]:
    spec = getattr(Service, f"{method}_result").thrift_spec
    return {entry[2].__name__: entry[2] for fid, entry in spec.items() if fid != 0}


def to_thrift_error(method: str, exc: BaseException) -> BaseException:
    """The exception to send for ``exc`` from ``method``: one the method declares, with the same message."""
    declared = _declared_exceptions(method)
    message = _one_line(str(exc) or exc.__class__.__name__)
    preferences = next((names for kind, names in _PREFERENCES if isinstance(exc, kind)), _FALLBACK)
    for name in (*preferences, *_FALLBACK):
        if name in declared:
            error: BaseException = declared[name](message=message)
            return error
    return TApplicationException(TApplicationException.INTERNAL_ERROR, f"{method} failed: {message}")


def _mapped(method: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any) -> Any:
        try:
            return func(*args)
        except MetastoreError as exc:
            raise to_thrift_error(method, exc) from exc
        except (ValueError, KeyError) as exc:  # malformed input that slipped past struct conversion
            raise to_thrift_error(
                method, InvalidObjectError(f"{method}: invalid request: {_reason(exc)}")
            ) from exc
        except DataError as exc:  # a value the database cannot hold or compare: the request's fault
            raise to_thrift_error(method, _refused_value(method, exc)) from exc
        except (AttributeError, TypeError) as exc:
            if not _is_missing_value(exc):
                raise _internal_error(method, exc) from exc
            log.info("%s: request with a missing or mistyped field", method, exc_info=exc)
            raise to_thrift_error(method, _missing_value(method, args)) from exc
        except Exception as exc:
            raise _internal_error(method, exc) from exc

    return wrapper


_MAX_MESSAGE_CHARS = 2000


def _one_line(message: str) -> str:
    """Clients show the message as is: one line, bounded (names in it come from the client)."""
    line = " ".join(message.splitlines())
    return line if len(line) <= _MAX_MESSAGE_CHARS else line[: _MAX_MESSAGE_CHARS - 3] + "..."


def _reason(exc: ValueError | KeyError) -> str:
    """What was wrong with the request, without echoing the values sent or the validator's internals."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'value'}: {error['msg']}"
            for error in exc.errors()[:3]
        )
    if isinstance(exc, KeyError):
        return f"missing or unknown {exc.args[0]!r}" if exc.args else "missing value"
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__


def _is_missing_value(exc: AttributeError | TypeError) -> bool:
    """Whether the failure is a value the request did not carry: the binary protocol skips a field sent with
    another type than the IDL's, so a wrong type arrives as None."""
    return "NoneType" in str(exc)


def _missing_value(method: str, args: Sequence[Any]) -> InvalidObjectError:
    """Names the arguments that arrived empty, when the missing value is one of them."""
    spec = getattr(Service, f"{method}_args").thrift_spec
    names = [entry[1] for _, entry in sorted(spec.items())]
    missing = [name for name, value in zip(names, args, strict=False) if value is None]
    where = f"argument {', '.join(repr(n) for n in missing)}" if missing else "a field of the request"
    return InvalidObjectError(
        f"{method}: invalid request: {where} is missing or has the wrong type; send every field with the "
        "type of the Hive Metastore IDL"
    )


def _refused_value(method: str, exc: DataError) -> InvalidObjectError:
    """What the database said about a value it refused (a NUL on PostgreSQL, too long for a column on MySQL),
    without the SQL statement or its parameters."""
    reason = (str(exc.orig) or type(exc.orig).__name__).splitlines()[0]
    return InvalidObjectError(
        f"{method}: the metastore database refuses a value of the request ({reason}); "
        "remove NUL characters and shorten the values"
    )


def _internal_error(method: str, exc: BaseException) -> BaseException:
    """An unexpected failure: the detail (SQL, parameters, traceback) goes to the server log under an id, the
    client gets the id only."""
    error_id = uuid.uuid4().hex[:12]
    log.error("%s failed (error id %s)", method, error_id, exc_info=exc)
    return to_thrift_error(
        method,
        MetastoreError(
            f"internal error {error_id} in {method}; see the metastore server log for the details"
        ),
    )


class ErrorMappingDispatcher:
    """What the Thrift processor calls: the handler's methods with errors mapped at this one boundary.

    Handler methods call each other freely; only the outermost call's declared exceptions matter.
    """

    def __init__(self, handler: MetastoreHandler) -> None:
        self._methods = {
            name: _mapped(name, getattr(handler, name))
            for name in Service.thrift_services
            if hasattr(handler, name)
        }

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self._methods[name]
        except KeyError:
            raise AttributeError(name) from None


# The API areas, and the dispatch table from method name to the area that serves it: every public method of an
# area (Thrift methods, and the in-process reads with write ids). A name served by two areas is a mistake.
AREAS: tuple[type[Area], ...] = (
    SessionApi,
    DatabaseApi,
    TableApi,
    ConstraintApi,
    PartitionReadApi,
    PartitionSpecApi,
    PartitionWriteApi,
    FunctionApi,
    StatisticsApi,
    TransactionApi,
    NotificationApi,
    RequestFormApi,
    PrivilegeApi,
)


def _dispatch_table(areas: Sequence[type[Area]]) -> dict[str, type[Area]]:
    table: dict[str, type[Area]] = {}
    for area in areas:
        for name, member in vars(area).items():
            if name.startswith("_") or not callable(member):
                continue
            if name in table:
                raise TypeError(f"method {name} is served by both {table[name].__name__} and {area.__name__}")
            table[name] = area
    return table


DISPATCH: dict[str, type[Area]] = _dispatch_table(AREAS)

# Catalog writes. With a metadata cache, eventual reads through this instance (tables without write ids,
# databases) go to the database until the cache has applied the instance's own last write.
_CATALOG_WRITES = (
    "create_database",
    "drop_database",
    "alter_database",
    "create_table",
    "create_table_with_environment_context",
    "drop_table",
    "drop_table_with_environment_context",
    "alter_table",
    "alter_table_with_environment_context",
    "alter_table_with_cascade",
    "create_table_with_constraints",
    "add_primary_key",
    "add_foreign_key",
    "add_unique_constraint",
    "add_not_null_constraint",
    "add_default_constraint",
    "add_check_constraint",
    "drop_constraint",
    "add_partition",
    "add_partition_with_environment_context",
    "add_partitions",
    "add_partitions_req",
    "drop_partition",
    "drop_partition_with_environment_context",
    "drop_partition_by_name",
    "drop_partitions_req",
    "alter_partition",
    "alter_partitions",
    "alter_partition_with_environment_context",
    "alter_partitions_with_environment_context",
    "rename_partition",
    "fire_listener_event",
    "create_database_req",
    "alter_database_req",
    "drop_partition_req",
    "drop_database_req",
    "create_table_req",
    "drop_table_req",
    "alter_table_req",
    "truncate_table",
    "truncate_table_req",
    "alter_partitions_req",
    "rename_partition_req",
    "drop_partition_by_name_with_environment_context",
)


class MetastoreHandler:
    """One instance serves every connection; per-connection state (the user) lives in a thread-local.

    Its Thrift methods are those of its API areas, found through ``dispatch`` (method name -> the area's
    bound method, wrapped where the whole API needs it: cache fences for catalog writes, Hive 3/4 qualified
    names). With a ``MetadataCache``, table, partition and database reads are answered from it when it may
    (see ``hmsrepl.cache``); without one, every read goes to the database.
    """

    def __init__(
        self, store: Metastore, cache: MetadataCache | None = None, *, security: ThriftSecurity | None = None
    ) -> None:
        self.context = HandlerContext(store, cache, security=security)
        self.store = store
        self.catalog = store.catalog
        self.cache = cache
        self.areas = {area: area(self.context) for area in AREAS}
        self.dispatch: dict[str, Callable[..., Any]] = {
            name: getattr(self.areas[area], name) for name, area in DISPATCH.items()
        }
        if cache is not None:
            for name in _CATALOG_WRITES:
                self.dispatch[name] = _fenced(self.dispatch[name], cache)
        accept_qualified_names(self.dispatch)  # Hive 3/4 clients send @hive#db names

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """A method of the API, as the Thrift processor and in-process callers ask for it by name."""
        try:
            return self.__dict__["dispatch"][name]  # type: ignore[no-any-return]
        except KeyError:
            raise AttributeError(name) from None

    @staticmethod
    def serves(name: str) -> bool:
        """Whether a method of this name is part of the handler's API (any instance: the table is static)."""
        return name in DISPATCH

    def begin_connection(self, peer: Peer) -> types.SimpleNamespace:
        """A new connection's state, current in this thread (``HandlerContext.begin_connection``)."""
        return self.context.begin_connection(peer)

    def resume_connection(self, state: types.SimpleNamespace) -> None:
        self.context.resume_connection(state)

    @property
    def peer(self) -> Peer | None:
        return self.context.peer

    @property
    def caller(self) -> str:
        """The user the notification API authorizes for this connection (``HandlerContext.caller``)."""
        return self.context.caller


def _fenced(method: Callable[..., Any], cache: MetadataCache) -> Callable[..., Any]:
    @functools.wraps(method)
    def write(*args: Any) -> Any:
        try:
            return method(*args)
        finally:  # also after a failure: part of a multi-step write may have committed
            cache.note_local_write()

    return write
