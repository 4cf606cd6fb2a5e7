"""Serves Hive Metastore Thrift calls from a ``Metastore``.

Each method translates structs, calls the core, and translates back; errors are mapped onto whichever
exception types the called method declares (a client only understands those), so a missing table is a
NoSuchObjectException where declared and a MetaException with the same message elsewhere. The connection's
user is its Kerberos principal's short name when the port authenticates (``set_ugi`` may only narrow it, or
switch to a user the principal may impersonate), else whatever ``set_ugi`` claims (loopback-only servers).
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import struct
import threading
import types
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy.exc import DataError
from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TApplicationException, TType
from thriftpy2.utils import serialize

from hmsrepl import __version__
from hmsrepl.bounds import resource_bounds
from hmsrepl.cache import CachedReads, MetadataCache
from hmsrepl.cache.attribution import TxnWriter, requested_txn
from hmsrepl.exceptions import (
    AccessDeniedError,
    AlreadyExistsError,
    InvalidInputError,
    InvalidObjectError,
    InvalidOperationError,
    InvalidPartitionValueError,
    LimitExceededError,
    MetastoreError,
    NoSuchLockError,
    NoSuchObjectError,
    NoSuchPartitionError,
    NoSuchTxnError,
    TxnAbortedError,
    TxnOpenError,
)
from hmsrepl.formats.partition_names import make_partition_name, parse_partition_name
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.locks import LockComponent, LockInfo
from hmsrepl.metastore.model import Partition
from hmsrepl.metastore.partition_pages import PAGE_ROWS, PartitionPages
from hmsrepl.thrift import compactions, convert
from hmsrepl.thrift.budget import CallMemory, charge
from hmsrepl.thrift.catalogs import CATALOG, accept_qualified_names
from hmsrepl.thrift.hive3_insert import hive3_overwrote
from hmsrepl.thrift.idl import Service, hms
from hmsrepl.thrift.statistics import stat_from_thrift, stat_to_thrift

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
            return declared[name](message=message)
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


CACHE_METRICS_KEY = "hmsrepl.cache.metrics"
# Partitions a connection's INSERTs declared and no alter took yet (a dynamic-partition load's, at most the
# partitions it writes at once); beyond this the oldest is forgotten and its alter lists it.
MAX_DECLARED = 1024
# The server's own protocol (binary), so kept encodings can be sent as they are.
_ENCODER = TCyBinaryProtocolFactory()


class Wire:
    """A partition's Thrift struct and its binary-protocol encoding, kept together with a cached partition."""

    __slots__ = ("encoded", "struct")

    def __init__(self, model: Partition) -> None:
        self.struct = convert.partition_to_thrift(model)
        self.encoded = serialize(self.struct, _ENCODER)


class EncodedStructs(list):
    """A list of structs whose encodings are known, so the server writes them without encoding again.

    Encoding 1,000 partitions costs the server ~8 ms, more than finding them in the cache; on a cache hit
    each partition's encoding was kept from the first time it was sent. Still a plain list of structs for
    in-process callers.
    """

    def __init__(self, wires: Sequence[Wire]) -> None:
        super().__init__(wire.struct for wire in wires)
        self.encoded = [wire.encoded for wire in wires]

    def result_bytes(self) -> bytes:
        """The binary encoding of a ``*_result`` struct whose field 0 (success) is this list."""
        header = struct.pack("!bhbi", TType.LIST, 0, TType.STRUCT, len(self.encoded))
        return b"".join([header, *self.encoded, b"\x00"])  # the trailing STOP closes the result struct


@functools.lru_cache(maxsize=4096)
def _write_ids(text: str | None) -> ValidWriteIdList | None:
    """Parsed once per distinct list: every call of a query repeats its lists, and parsing is half a hit's cost.

    No list (an old client, or a non-transactional table) means a read that does not ask for a snapshot.
    """
    return ValidWriteIdList.parse(text) if text else None


def _table_id(value: int | None) -> Any:
    return value if value is not None and value > 0 else None


def _partition_structs() -> dict[str, Any]:
    """How a partition list read answers the handler: structs (wire encodings kept on a cache hit), built
    straight from the stored documents on the database path (a fresh decoder per reply), in pages of
    ``PAGE_ROWS`` read as the reply is written (``partition_pages``), each page's decoding charged to the
    call's memory budget before it is done."""
    return {
        "to": convert.partition_to_thrift,
        "keep": Wire,
        "decode": convert.PartitionDocs(),
        "page_rows": PAGE_ROWS,
        "charges": CallMemory.current(),
    }


#: Memory the models (and stored documents) built from one partition struct of a request take, at least
#: (3.8 kB measured for a partition without parameters; charged per struct before they are built).
PARTITION_MODEL_BYTES = 4096


def _partition_models(parts: Sequence[Any], db_name: str, tbl_name: str) -> list[Partition]:
    """A request's partitions as models, their memory charged to the call's budget before they are built
    (a 99 MB ``add_partitions`` builds ~2 GB of models): refused with the method's MetaException naming the
    limit when it cannot be had."""
    charge(len(parts) * PARTITION_MODEL_BYTES)
    return [convert.partition_from_thrift(p, db_name, tbl_name) for p in parts]


def _partitions_out(found: Sequence[Any]) -> Sequence[Any]:
    """Cache hits come as Wire objects (encoded once); database reads as structs, encoded as usual, or as
    pages (``PartitionPages``) the server writes one at a time."""
    if isinstance(found, PartitionPages):
        return found
    if found and isinstance(found[0], Wire):
        return EncodedStructs(found)
    return found


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
)


class MetastoreHandler:
    """One instance serves every connection; per-connection state (the user) lives in a thread-local.

    With a ``MetadataCache``, table, partition and database reads are answered from it when it may (see
    ``hmsrepl.cache``); without one, every read goes to the database.
    """

    def __init__(
        self, store: Metastore, cache: MetadataCache | None = None, *, security: ThriftSecurity | None = None
    ) -> None:
        self.store = store
        self.security = security
        self.catalog = store.catalog
        self.cache = cache
        self.reads = CachedReads(store.catalog, cache)
        self.txn_writes = TxnWriter(store)
        self._current = threading.local()
        if cache is not None:
            for name in _CATALOG_WRITES:
                setattr(self, name, _fenced(getattr(self, name), cache))
        accept_qualified_names(self)  # Hive 3/4 clients send @hive#db names

    def begin_connection(self, peer: Peer) -> types.SimpleNamespace:
        """A new connection's state (who it is, what set_ugi said, declared writes), current in this thread.

        The server keeps it with the connection and makes it current (``resume_connection``) in whichever worker
        thread runs the connection's next call."""
        state = types.SimpleNamespace(peer=peer, user=peer.user or "", declared={}, declares=False)
        self._current.state = state
        return state

    def resume_connection(self, state: types.SimpleNamespace) -> None:
        self._current.state = state

    @property
    def _local(self) -> types.SimpleNamespace:
        """The state of the connection whose call this thread runs (in-process callers: one per thread)."""
        state = getattr(self._current, "state", None)
        if state is None:
            state = self._current.state = types.SimpleNamespace()
        return state

    @property
    def peer(self) -> Peer | None:
        return getattr(self._local, "peer", None)

    @property
    def caller(self) -> str:
        """The user the notification API authorizes for this connection.

        Without authentication: what set_ugi claimed (empty until the client identifies itself). With it: the
        authenticated user; a principal that impersonates another user through set_ugi gets the lesser of the
        two (an admin acting as alice is alice, a proxy acting as an admin is still the proxy).
        """
        user = getattr(self._local, "user", "")
        peer = self.peer
        if peer is None or not peer.authenticated:
            return user
        if user != peer.user and peer.user in self.store.config.admin_users:
            return user
        return peer.user or ""

    # -- session -------------------------------------------------------------------------------------------
    def getName(self) -> str:
        return "hmsrepl metastore"

    def getVersion(self) -> str:
        return __version__

    def shutdown(self) -> None:
        """Clients send this one-way call when they close; the server itself keeps running."""

    def set_ugi(self, user_name: str, group_names: list[str] | None) -> list[str]:
        peer = self.peer
        if peer is not None and peer.authenticated and user_name:
            if self.security is None or not self.security.may_impersonate(peer, user_name):
                raise AccessDeniedError(
                    f"set_ugi: principal {peer.principal} (user '{peer.user}') may not act as '{user_name}'; "
                    f"connect with {user_name}'s own credentials, or allow it in HMSREPL_PROXY_USERS"
                )
            self._local.user = user_name
        elif peer is None or not peer.authenticated:
            self._local.user = user_name or ""
        return list(group_names or [])

    def _exposed_settings(self) -> dict[str, str]:
        """The server settings clients may read, under Hive's names."""
        return {
            "hive.metastore.warehouse.dir": self.store.config.warehouse,
            "hive.repl.cmrootdir": self.store.config.cmroot,
            "hive.metastore.dml.events": "true",
        }

    def getMetaConf(self, key: str) -> str:
        if key == CACHE_METRICS_KEY:  # runtime state rather than a setting, but the one call every client has
            return json.dumps(self.cache_metrics(), sort_keys=True)
        values = self._exposed_settings()
        if key not in values:
            raise InvalidObjectError(f"getMetaConf: '{key}' is not a metastore setting this server exposes")
        return values[key]

    def get_config_value(self, name: str, default_value: str) -> str:
        """The server's value where it has one (Hive 3 clients ask for the warehouse), else the default."""
        return self._exposed_settings().get(name, default_value)

    # -- databases ----------------------------------------------------------------------------------------
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

    # -- tables ---------------------------------------------------------------------------------------------
    def get_fields(self, db_name: str, table_name: str) -> list[Any]:
        table = self.reads.table(db_name, table_name)
        return [convert.field_to_thrift(c) for c in table.sd.cols]

    def get_schema(self, db_name: str, table_name: str) -> list[Any]:
        table = self.reads.table(db_name, table_name)
        return [convert.field_to_thrift(c) for c in [*table.sd.cols, *table.partition_keys]]

    def get_fields_with_environment_context(
        self, db_name: str, table_name: str, environment_context: Any
    ) -> list[Any]:
        return self.get_fields(db_name, table_name)

    def get_schema_with_environment_context(
        self, db_name: str, table_name: str, environment_context: Any
    ) -> list[Any]:
        return self.get_schema(db_name, table_name)

    def create_table(self, tbl: Any) -> None:
        self.catalog.create_table(convert.table_from_thrift(tbl))

    def create_table_with_environment_context(self, tbl: Any, environment_context: Any) -> None:
        self.create_table(tbl)

    def drop_table(self, dbname: str, name: str, delete_data: bool) -> None:
        self.catalog.drop_table(dbname, name, delete_data=bool(delete_data))

    def drop_table_with_environment_context(
        self, dbname: str, name: str, delete_data: bool, environment_context: Any
    ) -> None:
        self.drop_table(dbname, name, delete_data)

    def get_tables(self, db_name: str, pattern: str) -> list[str]:
        return self.catalog.get_tables(db_name, pattern)

    def get_tables_by_type(self, db_name: str, pattern: str, table_type: str) -> list[str]:
        return self.catalog.get_tables(db_name, pattern, table_type or None)

    def get_all_tables(self, db_name: str) -> list[str]:
        return self.catalog.get_tables(db_name)

    def get_table_meta(self, db_patterns: str, tbl_patterns: str, tbl_types: list[str] | None) -> list[Any]:
        out = []
        for db in self.catalog.get_databases(db_patterns):
            names = self.catalog.get_tables(db, tbl_patterns)
            for table in self.catalog.get_table_objects(db, names):
                if tbl_types and str(table.table_type) not in tbl_types:
                    continue
                out.append(
                    hms.TableMeta(
                        dbName=db,
                        tableName=table.table_name,
                        tableType=str(table.table_type),
                        comments=table.parameters.get("comment"),
                        catName=convert.CATALOG,
                    )
                )
        return out

    def get_table(self, dbname: str, tbl_name: str) -> Any:
        return self.reads.table(dbname, tbl_name, to=convert.table_to_thrift)

    # -- constraints: none are stored; like Hive for a table declared without any, each read answers an empty
    # list (Hive 3 clients and Trino read them for every table they plan with). The table must exist.
    def get_primary_keys(self, request: Any) -> Any:
        self.reads.table(request.db_name, request.tbl_name)
        return hms.PrimaryKeysResponse(primaryKeys=[])

    def get_foreign_keys(self, request: Any) -> Any:
        """Either side may be named: the foreign keys of a table, or those that reference it."""
        for db_name, tbl_name in (
            (request.foreign_db_name, request.foreign_tbl_name),
            (request.parent_db_name, request.parent_tbl_name),
        ):
            if db_name and tbl_name:
                self.reads.table(db_name, tbl_name)
        return hms.ForeignKeysResponse(foreignKeys=[])

    def get_unique_constraints(self, request: Any) -> Any:
        self.reads.table(request.db_name, request.tbl_name)
        return hms.UniqueConstraintsResponse(uniqueConstraints=[])

    def get_not_null_constraints(self, request: Any) -> Any:
        self.reads.table(request.db_name, request.tbl_name)
        return hms.NotNullConstraintsResponse(notNullConstraints=[])

    def get_default_constraints(self, request: Any) -> Any:
        self.reads.table(request.db_name, request.tbl_name)
        return hms.DefaultConstraintsResponse(defaultConstraints=[])

    def get_check_constraints(self, request: Any) -> Any:
        self.reads.table(request.db_name, request.tbl_name)
        return hms.CheckConstraintsResponse(checkConstraints=[])

    def get_table_objects_by_name(self, dbname: str, tbl_names: list[str]) -> list[Any]:
        """Each chunk's tables charged to the call's memory budget before they are decoded."""
        return self.reads.tables(
            dbname, tbl_names or [], to=convert.table_to_thrift, charges=CallMemory.current()
        )

    def get_table_req(self, req: Any) -> Any:
        """Hive 4 sends the reader's ValidWriteIdList (field 6) and the table id (field 11, -1 if unset)."""
        write_ids = _write_ids(req.validWriteIdList) if req.validWriteIdList else None
        table_id = req.id if req.id is not None and req.id >= 0 else None
        table = self.reads.table(req.dbName, req.tblName, write_ids, table_id, to=convert.table_to_thrift)
        return hms.GetTableResult(table=table)

    def alter_table(self, dbname: str, tbl_name: str, new_tbl: Any) -> None:
        """A client that names its files in INSERTs on this connection declares its table writes: Hive's
        loadTable alters the table, then fires the INSERT naming the new files, so the alter lists nothing
        (``CatalogService.alter_table``, ``declared``)."""
        declares = getattr(self._local, "declares", False)
        self.catalog.alter_table(dbname, tbl_name, convert.table_from_thrift(new_tbl), declared=declares)

    def alter_table_with_environment_context(
        self, dbname: str, tbl_name: str, new_tbl: Any, environment_context: Any
    ) -> None:
        """With property ``hmsrepl.txnId`` (see hmsrepl.cache.attribution) the change joins that txn."""
        txn = requested_txn(_properties(environment_context))
        if txn is None:
            return self.alter_table(dbname, tbl_name, new_tbl)
        # Not Table.writeId: clients send back the table they read, whose writeId is the previous write's.
        write = self.txn_writes.resolve(txn[0], txn[1], dbname, tbl_name)
        self.txn_writes.alter_table(dbname, tbl_name, convert.table_from_thrift(new_tbl), write)
        return None

    def alter_table_with_cascade(self, dbname: str, tbl_name: str, new_tbl: Any, cascade: bool) -> None:
        self.alter_table(dbname, tbl_name, new_tbl)

    # -- partitions -------------------------------------------------------------------------------------------
    def _add(self, parts: Sequence[Any], if_not_exists: bool = False) -> list[Partition]:
        if not parts:
            return []
        first = parts[0]
        models = _partition_models(parts, first.dbName, first.tableName)
        return self.catalog.add_partitions(first.dbName, first.tableName, models, if_not_exists=if_not_exists)

    def add_partition(self, new_part: Any) -> Any:
        [added] = self._add([new_part])
        return convert.partition_to_thrift(
            self.catalog.get_partition(added.db_name, added.table_name, added.values)
        )

    def add_partition_with_environment_context(self, new_part: Any, environment_context: Any) -> Any:
        txn = requested_txn(_properties(environment_context))
        if txn is None:
            return self.add_partition(new_part)
        db_name, tbl_name = new_part.dbName, new_part.tableName
        write = self.txn_writes.resolve(txn[0], txn[1], db_name, tbl_name)
        [added] = self.txn_writes.add_partitions(
            db_name, tbl_name, [convert.partition_from_thrift(new_part)], write
        )
        return convert.partition_to_thrift(self.catalog.get_partition(db_name, tbl_name, added.values))

    def add_partitions(self, new_parts: list[Any]) -> int:
        return len(self._add(new_parts or []))

    def add_partitions_req(self, request: Any) -> Any:
        parts = [
            p if p.dbName and p.tableName else _with_names(p, request.dbName, request.tblName)
            for p in request.parts or []
        ]
        added = self._add(parts, if_not_exists=bool(request.ifNotExists))
        if request.needResult is False:
            return hms.AddPartitionsResult()
        return hms.AddPartitionsResult(partitions=[convert.partition_to_thrift(p) for p in added])

    def drop_partition(self, db_name: str, tbl_name: str, part_vals: list[str], delete_data: bool) -> bool:
        self.catalog.drop_partitions(db_name, tbl_name, [part_vals], delete_data=bool(delete_data))
        return True

    def drop_partition_with_environment_context(
        self, db_name: str, tbl_name: str, part_vals: list[str], delete_data: bool, environment_context: Any
    ) -> bool:
        return self.drop_partition(db_name, tbl_name, part_vals, delete_data)

    def drop_partition_by_name(self, db_name: str, tbl_name: str, part_name: str, delete_data: bool) -> bool:
        return self.drop_partition(db_name, tbl_name, self.partition_name_to_vals(part_name), delete_data)

    def drop_partitions_req(self, req: Any) -> Any:
        if req.parts is None or req.parts.names is None:
            raise InvalidObjectError(
                f"drop_partitions_req on '{req.dbName}.{req.tblName}': dropping by expression is not supported; "
                "pass partition names"
            )
        names = list(req.parts.names)
        if req.ifExists is not False:
            existing = {
                self._name(p) for p in self.catalog.get_partitions_by_names(req.dbName, req.tblName, names)
            }
            names = [n for n in names if n in existing]
        dropped = self.catalog.drop_partitions(
            req.dbName,
            req.tblName,
            [self.partition_name_to_vals(n) for n in names],
            delete_data=req.deleteData is not False,
        )
        if req.needResult is False:
            return hms.DropPartitionsResult()
        return hms.DropPartitionsResult(partitions=[convert.partition_to_thrift(p) for p in dropped])

    def _name(self, part: Partition) -> str:
        table = self.catalog.get_table(part.db_name, part.table_name)
        return make_partition_name(table.partition_key_names, part.values)

    def get_partition(self, db_name: str, tbl_name: str, part_vals: list[str]) -> Any:
        found = self.reads.partition(
            db_name, tbl_name, part_vals or [], to=convert.partition_to_thrift, keep=Wire
        )
        return found.struct if isinstance(found, Wire) else found

    def get_partition_with_auth(
        self, db_name: str, tbl_name: str, part_vals: list[str], user_name: str, group_names: Any
    ) -> Any:
        return self.get_partition(db_name, tbl_name, part_vals)

    def get_partition_by_name(self, db_name: str, tbl_name: str, part_name: str) -> Any:
        return self.get_partition(db_name, tbl_name, self.partition_name_to_vals(part_name))

    def get_partitions(self, db_name: str, tbl_name: str, max_parts: int) -> Sequence[Any]:
        return _partitions_out(
            _capped(
                db_name,
                tbl_name,
                max_parts,
                lambda limit: self.reads.partitions(db_name, tbl_name, limit, **_partition_structs()),
                lambda: len(self.reads.partition_names(db_name, tbl_name, -1)),
            )
        )

    def get_partitions_with_auth(
        self, db_name: str, tbl_name: str, max_parts: int, user_name: str, group_names: Any
    ) -> Sequence[Any]:
        return self.get_partitions(db_name, tbl_name, max_parts)

    def get_partition_names(self, db_name: str, tbl_name: str, max_parts: int) -> list[str]:
        return self.reads.partition_names(db_name, tbl_name, _limit(max_parts))

    def get_partitions_ps(
        self, db_name: str, tbl_name: str, part_vals: list[str], max_parts: int
    ) -> Sequence[Any]:
        return _partitions_out(
            _capped(
                db_name,
                tbl_name,
                max_parts,
                lambda limit: self.reads.partitions_ps(
                    db_name, tbl_name, part_vals or [], limit, **_partition_structs()
                ),
                lambda: len(self.reads.partition_names_ps(db_name, tbl_name, part_vals or [], -1)),
            )
        )

    def get_partitions_ps_with_auth(
        self,
        db_name: str,
        tbl_name: str,
        part_vals: list[str],
        max_parts: int,
        user_name: str,
        group_names: Any,
    ) -> Sequence[Any]:
        return self.get_partitions_ps(db_name, tbl_name, part_vals, max_parts)

    def get_partition_names_ps(
        self, db_name: str, tbl_name: str, part_vals: list[str], max_parts: int
    ) -> list[str]:
        return self.reads.partition_names_ps(db_name, tbl_name, part_vals or [], _limit(max_parts))

    def get_partitions_by_filter(
        self, db_name: str, tbl_name: str, filter: str, max_parts: int
    ) -> Sequence[Any]:
        return _partitions_out(
            _capped(
                db_name,
                tbl_name,
                max_parts,
                lambda limit: self.reads.partitions_by_filter(
                    db_name, tbl_name, filter or "", limit, **_partition_structs()
                ),
            )
        )

    def get_partitions_by_names(self, db_name: str, tbl_name: str, names: list[str]) -> Sequence[Any]:
        return _partitions_out(
            self.reads.partitions_by_names(db_name, tbl_name, names or [], **_partition_structs())
        )

    def alter_partition(self, db_name: str, tbl_name: str, new_part: Any) -> None:
        self.alter_partitions(db_name, tbl_name, [new_part])

    def alter_partitions(self, db_name: str, tbl_name: str, new_parts: list[Any]) -> None:
        """An alter of partitions this connection's INSERTs recorded since their last alter is declared by
        them: Hive's loadPartition fires the INSERT naming the new files, then alters the partition, which
        then lists nothing (``CatalogService.alter_partitions``, ``declared``). A dynamic-partition load
        interleaves several partitions' pairs on one connection; each alter takes its own INSERT's
        declaration."""
        models = _partition_models(new_parts or [], db_name, tbl_name)
        pending = self._declared()
        written = [(db_name.lower(), tbl_name.lower(), tuple(m.values)) for m in models]
        declared = bool(written) and all(key in pending for key in written)
        for key in written:
            pending.pop(key, None)
        self.catalog.alter_partitions(db_name, tbl_name, models, declared=declared)

    def _declared(self) -> dict[tuple[str, str, tuple[str, ...]], None]:
        """This connection's partitions whose INSERT came and whose alter has not, oldest first."""
        pending = getattr(self._local, "declared", None)
        if pending is None:
            pending = self._local.declared = {}
        return pending

    def alter_partition_with_environment_context(
        self, db_name: str, tbl_name: str, new_part: Any, environment_context: Any
    ) -> None:
        self.alter_partitions_with_environment_context(db_name, tbl_name, [new_part], environment_context)

    def alter_partitions_with_environment_context(
        self, db_name: str, tbl_name: str, new_parts: list[Any], environment_context: Any
    ) -> None:
        """With property ``hmsrepl.txnId`` (see hmsrepl.cache.attribution) the change joins that txn."""
        txn = requested_txn(_properties(environment_context))
        if txn is None:
            return self.alter_partitions(db_name, tbl_name, new_parts)
        write = self.txn_writes.resolve(txn[0], txn[1], db_name, tbl_name)
        models = _partition_models(new_parts or [], db_name, tbl_name)
        self.txn_writes.alter_partitions(db_name, tbl_name, models, write)
        return None

    # -- reads with a ValidWriteIdList (Python API) -----------------------------------------------------------
    # Hive 3/4 send the reader's list and the table id in request structs that this Hive 2.3-shaped IDL does
    # not have for partitions (PartitionsRequest 5/6, GetPartitionsByNamesRequest 8/10, GetPartitionRequest
    # 5/6); until they are served over Thrift, in-process callers read partitions consistently with these.
    def get_partitions_with_write_ids(
        self, db_name: str, tbl_name: str, valid_write_id_list: str, table_id: int, max_parts: int = -1
    ) -> Sequence[Any]:
        write_ids = _write_ids(valid_write_id_list)
        return _partitions_out(
            _capped(
                db_name,
                tbl_name,
                max_parts,
                lambda limit: self.reads.partitions(
                    db_name, tbl_name, limit, write_ids, table_id, **_partition_structs()
                ),
                lambda: len(self.reads.partition_names(db_name, tbl_name, -1)),
            )
        )

    def get_partitions_by_names_with_write_ids(
        self, db_name: str, tbl_name: str, names: list[str], valid_write_id_list: str, table_id: int
    ) -> Sequence[Any]:
        write_ids = _write_ids(valid_write_id_list)
        return _partitions_out(
            self.reads.partitions_by_names(
                db_name, tbl_name, names, write_ids, table_id, **_partition_structs()
            )
        )

    def get_partition_with_write_ids(
        self, db_name: str, tbl_name: str, part_vals: list[str], valid_write_id_list: str, table_id: int
    ) -> Any:
        write_ids = _write_ids(valid_write_id_list)
        found = self.reads.partition(
            db_name, tbl_name, part_vals, write_ids, table_id, to=convert.partition_to_thrift, keep=Wire
        )
        return found.struct if isinstance(found, Wire) else found

    # Hive 3/4 request forms: the write-id list and table id let the cache answer (Hive's -1 = no id).
    def get_partitions_req(self, req: Any) -> Any:
        parts = self.get_partitions_with_write_ids(
            req.dbName, req.tblName, req.validWriteIdList, _table_id(req.id), req.maxParts
        )
        return hms.PartitionsResponse(partitions=list(parts))

    def get_partitions_by_names_req(self, req: Any) -> Any:
        parts = self.get_partitions_by_names_with_write_ids(
            req.db_name, req.tbl_name, list(req.names or []), req.validWriteIdList, _table_id(req.id)
        )
        return hms.GetPartitionsByNamesResult(partitions=list(parts))

    def get_partition_req(self, req: Any) -> Any:
        part = self.get_partition_with_write_ids(
            req.dbName, req.tblName, list(req.partVals or []), req.validWriteIdList, _table_id(req.id)
        )
        return hms.GetPartitionResponse(partition=part)

    def cache_metrics(self) -> dict[str, Any]:
        """The cache's hits, misses by reason and lag in events (``{"enabled": false}`` without a cache)."""
        if self.cache is None:
            return {"enabled": False}
        return {"enabled": True, **self.cache.metrics()}

    def rename_partition(self, db_name: str, tbl_name: str, part_vals: list[str], new_part: Any) -> None:
        if list(new_part.values or []) != list(part_vals or []):
            raise InvalidOperationError(
                f"renaming partitions of '{db_name}.{tbl_name}' is not supported; drop and add instead"
            )
        self.alter_partitions(db_name, tbl_name, [new_part])

    def partition_name_to_spec(self, part_name: str) -> dict[str, str]:
        return dict(self._parse_name(part_name))

    def partition_name_to_vals(self, part_name: str) -> list[str]:
        return [value for _, value in self._parse_name(part_name)]

    @staticmethod
    def _parse_name(part_name: str) -> list[tuple[str, str]]:
        try:
            return parse_partition_name(part_name)
        except ValueError as exc:
            raise InvalidObjectError(str(exc)) from exc

    # -- functions ------------------------------------------------------------------------------------------------
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

    # -- notification log -----------------------------------------------------------------------------------------
    def get_next_notification(self, rqst: Any) -> Any:
        max_events = rqst.maxEvents if rqst.maxEvents and rqst.maxEvents > 0 else None
        skip = set(rqst.eventTypeSkipList or [])
        events = []
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
        """
        insert = rqst.data.insertData if rqst.data is not None else None
        if insert is None:
            raise InvalidObjectError("fire_listener_event: only insert events (insertData) are supported")
        files = list(insert.filesAdded or [])
        hive3 = insert.filesAddedChecksumV3 is not None or insert.subDirectoryList is not None
        if hive3 or not files:  # a Hive 3 client: its field 2 is the list of files
            files = list(insert.filesAddedChecksum or []) or files
        # Hive 3's 'replace' flag (field 1) cannot be read in the 2.3 shape: it is told from the location.
        replace = insert.filesAdded is None and hive3_overwrote(
            self.catalog, rqst.dbName, rqst.tableName, rqst.partitionVals, files
        )
        before = self.store.get_current_notification_event_id()
        pending = self._declared()
        key = (rqst.dbName.lower(), rqst.tableName.lower(), tuple(rqst.partitionVals or ()))
        pending.pop(key, None)
        try:
            self.catalog.insert(
                rqst.dbName,
                rqst.tableName,
                rqst.partitionVals or None,
                new_files=files or None,
                replace=replace,
            )
        except NoSuchPartitionError:
            # Spark's Hive client reports an overwrite into a new partition before it adds the partition;
            # the ADD_PARTITION that follows lists the files, so there is nothing to log yet.
            return hms.FireEventResponse(eventIds=[])
        self._local.declares = True
        if rqst.partitionVals:  # the alter_partition Hive sends next changes no data of its own
            pending[key] = None
            while len(pending) > MAX_DECLARED:
                pending.pop(next(iter(pending)))
        events = self.store.events.next_events(before, db_name=rqst.dbName, table_name=rqst.tableName)
        return hms.FireEventResponse(eventIds=[e.event_id for e in events if e.event_type == "INSERT"][-1:])

    # -- transactions -----------------------------------------------------------------------------------------------
    def get_open_txns(self) -> Any:
        snapshot = self.store.txns.get_valid_txns()
        return _open_txns_response(snapshot)

    def open_txns(self, rqst: Any) -> Any:
        if rqst.replPolicy:
            raise InvalidOperationError(
                "open_txns with replPolicy (replicated txns) is not supported by this server"
            )
        ids = self.store.txns.open_txns(
            rqst.num_txns, user=rqst.user or "hive", host=rqst.hostname or _host()
        )
        return hms.OpenTxnsResponse(txn_ids=ids)

    def abort_txn(self, rqst: Any) -> None:
        self.store.txns.abort_txns([rqst.txnid])

    def abort_txns(self, rqst: Any) -> None:
        self.store.txns.abort_txns(list(rqst.txn_ids or []))

    def commit_txn(self, rqst: Any) -> None:
        self.store.txns.commit_txn(rqst.txnid)

    def heartbeat_txn_range(self, txns: Any) -> Any:
        aborted, nosuch = set(), set()
        for txn_id in range(txns.min, txns.max + 1):
            try:
                self.store.txns.heartbeat(txn_id)
            except NoSuchTxnError:
                nosuch.add(txn_id)
            except (TxnAbortedError, InvalidOperationError):
                aborted.add(txn_id)
        return hms.HeartbeatTxnRangeResponse(aborted=aborted, nosuch=nosuch)

    def get_valid_write_ids(self, rqst: Any) -> Any:
        snapshot = ValidTxnList.parse(rqst.validTxnList) if rqst.validTxnList else None
        entries = self.store.txns.get_valid_write_ids(list(rqst.fullTableNames or []), snapshot)
        return hms.GetValidWriteIdsResponse(tblValidWriteIds=[_table_write_ids(e.write_ids) for e in entries])

    def allocate_table_write_ids(self, rqst: Any) -> Any:
        if rqst.replPolicy or rqst.srcTxnToWriteIdList:
            raise InvalidOperationError(
                "allocating write ids for replicated txns is not supported by this server"
            )
        pairs = self.store.txns.allocate_table_write_ids(list(rqst.txnIds or []), rqst.dbName, rqst.tableName)
        return hms.AllocateTableWriteIdsResponse(
            txnToWriteIds=[hms.TxnToWriteId(txnId=p.txn_id, writeId=p.write_id) for p in pairs]
        )

    # -- locks -------------------------------------------------------------------------------------------------
    def lock(self, rqst: Any) -> Any:
        components = [_lock_component(c) for c in rqst.component or []]
        result = self.store.locks.lock(
            components,
            txn_id=rqst.txnid or None,
            user=rqst.user or self.caller or "unknown",
            host=rqst.hostname or "unknown",
            agent_info=rqst.agentInfo,
            zero_wait=bool(rqst.zeroWaitReadEnabled),
        )
        return _lock_response(result)

    def check_lock(self, rqst: Any) -> Any:
        return _lock_response(self.store.locks.check_lock(rqst.lockid, rqst.txnid or None))

    def unlock(self, rqst: Any) -> None:
        self.store.locks.unlock(rqst.lockid)

    def heartbeat(self, ids: Any) -> None:
        self.store.locks.heartbeat(ids.lockid or None, ids.txnid or None)

    def show_locks(self, rqst: Any) -> Any:
        found = self.store.locks.show_locks(rqst.dbname, rqst.tablename, rqst.partname, rqst.txnid or None)
        return hms.ShowLocksResponse(locks=[_show_lock(info) for info in found])

    # -- compaction (thrift.compactions) ------------------------------------------------------------------------
    def compact(self, rqst: Any) -> None:
        compactions.compact2(self.store, rqst)

    def compact2(self, rqst: Any) -> Any:
        return compactions.compact2(self.store, rqst)

    def show_compact(self, rqst: Any) -> Any:
        return compactions.show_compact(self.store, rqst)

    # -- column statistics -------------------------------------------------------------------------------------
    def update_table_column_statistics(self, stats_obj: Any) -> bool:
        return self._update_statistics(stats_obj, partitioned=False)

    def update_partition_column_statistics(self, stats_obj: Any) -> bool:
        return self._update_statistics(stats_obj, partitioned=True)

    def _update_statistics(self, stats_obj: Any, *, partitioned: bool, merge: bool = False) -> bool:
        desc = stats_obj.statsDesc
        if desc is None or not desc.dbName or not desc.tableName:
            raise InvalidObjectError("column statistics without statsDesc.dbName/tableName; name the table")
        if partitioned and not desc.partName:
            raise InvalidObjectError(
                f"partition statistics of '{desc.dbName}.{desc.tableName}' without statsDesc.partName; "
                "name the partition (e.g. ds=2024-01-01)"
            )
        self.store.stats.update(
            desc.dbName,
            desc.tableName,
            [stat_from_thrift(obj) for obj in stats_obj.statsObj or []],
            partition_name=desc.partName if partitioned else None,
            engine=stats_obj.engine,
            last_analyzed=desc.lastAnalyzed,
            merge=merge,
        )
        return True

    def get_table_column_statistics(self, db_name: str, tbl_name: str, col_name: str) -> Any:
        found = self.store.stats.table_stats(db_name, tbl_name, [col_name])
        if not found:
            raise NoSuchObjectError(f"column '{col_name}' of table '{db_name}.{tbl_name}' has no statistics")
        desc = hms.ColumnStatisticsDesc(isTblLevel=True, dbName=db_name.lower(), tableName=tbl_name.lower())
        return hms.ColumnStatistics(statsDesc=desc, statsObj=[stat_to_thrift(s) for s in found])

    def get_partition_column_statistics(
        self, db_name: str, tbl_name: str, part_name: str, col_name: str
    ) -> Any:
        found = self.store.stats.partition_stats(db_name, tbl_name, [part_name], [col_name]).get(part_name)
        if not found:
            raise NoSuchObjectError(
                f"column '{col_name}' of partition '{part_name}' of table '{db_name}.{tbl_name}' has no statistics"
            )
        desc = hms.ColumnStatisticsDesc(
            isTblLevel=False, dbName=db_name.lower(), tableName=tbl_name.lower(), partName=part_name
        )
        return hms.ColumnStatistics(statsDesc=desc, statsObj=[stat_to_thrift(s) for s in found])

    def get_table_statistics_req(self, request: Any) -> Any:
        found = self.store.stats.table_stats(
            request.dbName, request.tblName, request.colNames or [], engine=request.engine
        )
        return hms.TableStatsResult(tableStats=[stat_to_thrift(s) for s in found])

    def get_partitions_statistics_req(self, request: Any) -> Any:
        found = self.store.stats.partition_stats(
            request.dbName,
            request.tblName,
            request.partNames or [],
            request.colNames or [],
            engine=request.engine,
        )
        return hms.PartitionsStatsResult(
            partStats={part: [stat_to_thrift(s) for s in stats] for part, stats in found.items() if part}
        )

    def get_aggr_stats_for(self, request: Any) -> Any:
        merged, found = self.store.stats.aggregate(
            request.dbName,
            request.tblName,
            request.partNames or [],
            request.colNames or [],
            engine=request.engine,
        )
        return hms.AggrStats(colStats=[stat_to_thrift(s) for s in merged], partsFound=found)

    def set_aggr_stats_for(self, request: Any) -> bool:
        """Several tables' or partitions' statistics at once (Hive's SetPartitionsStatsRequest), in one commit."""
        with self.store.events.transaction():
            for stats in request.colStats or []:
                if request.engine and not stats.engine:
                    stats.engine = request.engine
                partitioned = stats.statsDesc is not None and not stats.statsDesc.isTblLevel
                self._update_statistics(stats, partitioned=partitioned, merge=bool(request.needMerge))
        return True

    def delete_table_column_statistics(
        self, db_name: str, tbl_name: str, col_name: str | None, engine: str | None = None
    ) -> bool:
        self.store.stats.delete(db_name, tbl_name, col_name or None, engine=engine)
        return True

    def delete_partition_column_statistics(
        self, db_name: str, tbl_name: str, part_name: str, col_name: str | None, engine: str | None = None
    ) -> bool:
        if not part_name:
            raise InvalidObjectError(
                f"delete_partition_column_statistics of '{db_name}.{tbl_name}' needs part_name"
            )
        self.store.stats.delete(db_name, tbl_name, col_name or None, partition_name=part_name, engine=engine)
        return True

    # -- Hive 3/4 catalog reads ----------------------------------------------------------------------------------
    def get_table_objects_by_name_req(self, req: Any) -> Any:
        names = list(req.tblNames or [])
        if not names and req.tablesPattern:
            names = self.catalog.get_tables(req.dbName, req.tablesPattern)
        tables = self.catalog.get_table_objects(req.dbName, names)
        return hms.GetTablesResult(tables=[convert.table_to_thrift(t) for t in tables])

    def get_tables_ext(self, req: Any) -> list[Any]:
        names = self.catalog.get_tables(req.database, req.tableNamePattern or "*")
        if req.limit is not None and req.limit >= 0:
            names = names[: req.limit]
        return [hms.ExtendedTableInfo(tblName=name) for name in names]

    def get_database_req(self, request: Any) -> Any:
        if not request.name:
            raise InvalidObjectError("get_database_req without a database name; set GetDatabaseRequest.name")
        return self.get_database(request.name)

    def get_catalog(self, catName: Any) -> Any:
        if (catName.name or "").lower() != CATALOG:
            raise NoSuchObjectError(
                f"catalog '{catName.name}' does not exist; this metastore has only '{CATALOG}'"
            )
        catalog = hms.Catalog(
            name=CATALOG, description="Hive's default catalog", locationUri=self.store.config.warehouse
        )
        return hms.GetCatalogResponse(catalog=catalog)

    def get_catalogs(self) -> Any:
        return hms.GetCatalogsResponse(names=[CATALOG])


def _fenced(method: Callable[..., Any], cache: MetadataCache) -> Callable[..., Any]:
    @functools.wraps(method)
    def write(*args: Any) -> Any:
        try:
            return method(*args)
        finally:  # also after a failure: part of a multi-step write may have committed
            cache.note_local_write()

    return write


def _lock_component(c: Any) -> LockComponent:
    type_name = hms.LockType._VALUES_TO_NAMES.get(c.type)
    if type_name is None:
        raise InvalidObjectError(
            f"lock component on '{c.dbname}': unknown lock type {c.type}; send a Hive LockType"
        )
    level = hms.LockLevel._VALUES_TO_NAMES.get(c.level, "TABLE")
    table = c.tablename if level != "DB" else None
    partition = c.partitionname if level == "PARTITION" else None
    operation = hms.DataOperationType._VALUES_TO_NAMES.get(c.operationType) if c.operationType else None
    return LockComponent(type_name, c.dbname or "", table or None, partition or None, operation)


def _lock_response(result: Any) -> Any:
    state = getattr(hms.LockState, result.state)
    return hms.LockResponse(lockid=result.lock_id, state=state, errorMessage=result.message)


def _show_lock(info: LockInfo) -> Any:
    return hms.ShowLocksResponseElement(
        lockid=info.lock_id,
        dbname=info.db_name,
        tablename=info.table_name,
        partname=info.partition_name,
        state=getattr(hms.LockState, info.state),
        type=getattr(hms.LockType, info.lock_type),
        txnid=info.txn_id or None,
        lastheartbeat=info.last_heartbeat,
        acquiredat=info.acquired_at,
        user=info.user,
        hostname=info.host,
        heartbeatCount=info.heartbeat_count,
        agentInfo=info.agent_info,
        blockedByExtId=info.blocked_by,
        lockIdInternal=info.component,
    )


def _properties(environment_context: Any) -> dict[str, str] | None:
    return getattr(environment_context, "properties", None) if environment_context is not None else None


def _limit(max_parts: int | None) -> int:
    return -1 if max_parts is None or max_parts < 0 else max_parts


def _capped(
    db_name: str,
    tbl_name: str,
    max_parts: int | None,
    fetch: Callable[[int], Sequence[Any]],
    count: Callable[[], int] | None = None,
) -> Sequence[Any]:
    """Partitions read with ``fetch(limit)``, refused when there are more than the per-call cap.

    Like Hive's ``hive.metastore.limit.partition.request``: a call asking for at most the cap (``max_parts``)
    is served, so clients page through large tables; one asking for more fails only if more exist. Reading
    one past the cap tells which, without loading the whole table first.
    """
    cap = resource_bounds().max_partitions_per_call
    limit = _limit(max_parts)
    if cap < 0 or 0 <= limit <= cap:
        return fetch(limit)
    found = fetch(cap + 1)
    if len(found) <= cap:
        return found
    scanned = f"={count()}" if count is not None else f">{cap}"
    raise LimitExceededError(
        f"Number of partitions scanned ({scanned}) on table '{db_name}.{tbl_name}' exceeds limit (={cap}); "
        "ask for fewer with max_parts, narrow the request, or raise HMSREPL_MAX_PARTITIONS_PER_CALL"
    )


def _host() -> str:
    return socket.gethostname()


def _with_names(part: Any, db_name: str, table_name: str) -> Any:
    part.dbName = part.dbName or db_name
    part.tableName = part.tableName or table_name
    return part


def java_bitset_bytes(positions: Sequence[int]) -> bytes:
    """Java's BitSet.toByteArray for the given set bits (little-endian, trailing zero bytes trimmed)."""
    if not positions:
        return b""
    out = bytearray(max(positions) // 8 + 1)
    for pos in positions:
        out[pos // 8] |= 1 << (pos % 8)
    return bytes(out)


def _open_txns_response(snapshot: ValidTxnList) -> Any:
    invalid = sorted(snapshot.open_txns | snapshot.aborted_txns)
    bits = [i for i, txn in enumerate(invalid) if txn in snapshot.aborted_txns]
    return hms.GetOpenTxnsResponse(
        txn_high_water_mark=snapshot.high_watermark,
        open_txns=invalid,
        min_open_txn=min(snapshot.open_txns) if snapshot.open_txns else None,
        abortedBits=java_bitset_bytes(bits),
    )


def _table_write_ids(wids: ValidWriteIdList) -> Any:
    invalid = sorted(wids.exceptions)
    bits = [i for i, w in enumerate(invalid) if w in wids.aborted_write_ids]
    return hms.TableValidWriteIds(
        fullTableName=wids.table_name,
        writeIdHighWaterMark=wids.high_watermark,
        invalidWriteIds=invalid,
        minOpenWriteId=min(wids.open_write_ids) if wids.open_write_ids else None,
        abortedBits=java_bitset_bytes(bits),
    )
