"""Hive 4's metastore service as a maintained library publishes it: the reference our IDL is checked against.

pyiceberg ships bindings that Apache Thrift generated from Hive 4's ``hive_metastore.thrift`` (its
``hive_metastore`` package) and from fb303's service (its ``fb303`` package, which Hive's service extends).
They are read here at test time, never copied: the method names come from the generated ``Iface`` classes,
the field ids and wire types from the generated ``thrift_spec`` tuples.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from types import ModuleType

from fb303 import FacebookService
from hive_metastore import ThriftHiveMetastore, ttypes
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

SERVICES: tuple[ModuleType, ...] = (ThriftHiveMetastore, FacebookService)


def methods() -> list[str]:
    """Every method of Hive 4's ``ThriftHiveMetastore`` with those it inherits from fb303's ``FacebookService``."""
    return sorted(name for name, _ in inspect.getmembers(ThriftHiveMetastore.Iface, inspect.isfunction))


def call_struct(method: str, suffix: str) -> type | None:
    """The generated ``<method>_args`` or ``<method>_result`` class (None: a oneway method has no result)."""
    for service in SERVICES:
        found = getattr(service, method + suffix, None)
        if found is not None:
            return found
    return None


def structs() -> dict[str, type]:
    """Every generated struct, union and exception of Hive 4's IDL, by name."""
    return {
        name: value
        for name, value in vars(ttypes).items()
        if inspect.isclass(value) and getattr(value, "thrift_spec", None) is not None
    }


def enum(name: str) -> type:
    """A generated enum of Hive 4's IDL (``_VALUES_TO_NAMES`` maps values to names)."""
    return getattr(ttypes, name)


def fields(thrift_spec: tuple | None) -> dict[int, tuple[str, int]]:
    """Apache Thrift's ``thrift_spec`` (a tuple indexed by field id) as {field id: (name, wire type)}."""
    return {entry[0]: (entry[2], entry[1]) for entry in thrift_spec or () if entry is not None}


#: The text format most tests' tables use (Hive's default).
TEXT_FORMAT = (
    "org.apache.hadoop.mapred.TextInputFormat",
    "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
    "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
)


def hive4_table(
    db: str,
    name: str,
    keys: list[str],
    *,
    columns: tuple[tuple[str, str], ...] = (("id", "bigint"), ("name", "string")),
    formats: tuple[str, str, str] = TEXT_FORMAT,
    serde: object = None,
    location: str | None = None,
    parameters: dict[str, str] | None = None,
    external: bool = False,
) -> object:
    """A table as a Hive 4 client builds one in the generated bindings: ``formats`` is (input format, output
    format, serialization library); ``serde`` a whole ``SerDeInfo`` instead of the library's."""
    input_format, output_format, library = formats
    sd = ttypes.StorageDescriptor(
        cols=[ttypes.FieldSchema(column, kind, None) for column, kind in columns],
        location=location,
        inputFormat=input_format,
        outputFormat=output_format,
        serdeInfo=serde or ttypes.SerDeInfo(None, library, {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    return ttypes.Table(
        tableName=name,
        dbName=db,
        owner="hive",
        sd=sd,
        partitionKeys=[ttypes.FieldSchema(k, "string", None) for k in keys],
        parameters={**(parameters or {}), **({"EXTERNAL": "TRUE"} if external else {})},
        tableType="EXTERNAL_TABLE" if external else "MANAGED_TABLE",
        catName="hive",
    )


@contextlib.contextmanager
def hive4_client(port: int, user: str = "hive") -> Iterator[ThriftHiveMetastore.Client]:
    """Hive 4's generated client on the binary protocol, connected to a metastore on loopback as ``user``."""
    transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
    hive = ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
    transport.open()
    try:
        hive.set_ugi(user, [])
        yield hive
    finally:
        transport.close()
