"""Pure conversions between Thrift structs and the metastore's models.

Thrift structs allow None anywhere; models do not, so missing maps and lists become empty ones here and
nowhere else.
"""

from __future__ import annotations

import json
from typing import Any

from hmsrepl.metastore.model import (
    Database,
    FieldSchema,
    Function,
    Order,
    Partition,
    PrincipalType,
    ResourceUri,
    SerDeInfo,
    StorageDescriptor,
    Table,
    TableType,
)
from hmsrepl.thrift.idl import hms

PRINCIPAL_TO_THRIFT = {PrincipalType.USER: 1, PrincipalType.ROLE: 2, PrincipalType.GROUP: 3}
PRINCIPAL_FROM_THRIFT = {v: k for k, v in PRINCIPAL_TO_THRIFT.items()}
RESOURCE_TO_THRIFT = {"JAR": 1, "FILE": 2, "ARCHIVE": 3}
RESOURCE_FROM_THRIFT = {v: k for k, v in RESOURCE_TO_THRIFT.items()}
CATALOG = "hive"


def _params(value: dict[str, str] | None) -> dict[str, str]:
    return dict(value or {})


def field_from_thrift(f: Any) -> FieldSchema:
    return FieldSchema(name=f.name, type=f.type, comment=f.comment)


def field_to_thrift(f: FieldSchema) -> Any:
    return hms.FieldSchema(name=f.name, type=f.type, comment=f.comment)


def serde_from_thrift(serde: Any) -> SerDeInfo:
    return SerDeInfo(
        name=serde.name,
        serialization_lib=serde.serializationLib,
        parameters=_params(serde.parameters),
        description=serde.description,
        serializer_class=serde.serializerClass,
        deserializer_class=serde.deserializerClass,
        serde_type=serde.serdeType,
    )


def serde_to_thrift(serde: SerDeInfo) -> Any:
    return hms.SerDeInfo(
        name=serde.name,
        serializationLib=serde.serialization_lib,
        parameters=dict(serde.parameters),
        description=serde.description,
        serializerClass=serde.serializer_class,
        deserializerClass=serde.deserializer_class,
        serdeType=serde.serde_type,
    )


def sd_from_thrift(sd: Any) -> StorageDescriptor:
    if sd is None:
        return StorageDescriptor()
    serde = sd.serdeInfo
    return StorageDescriptor(
        cols=[field_from_thrift(c) for c in sd.cols or []],
        location=sd.location,
        input_format=sd.inputFormat,
        output_format=sd.outputFormat,
        compressed=bool(sd.compressed),
        num_buckets=sd.numBuckets if sd.numBuckets is not None else -1,
        serde_info=serde_from_thrift(serde) if serde is not None else None,
        bucket_cols=list(sd.bucketCols or []),
        sort_cols=[Order(col=o.col, order=o.order if o.order is not None else 1) for o in sd.sortCols or []],
        parameters=_params(sd.parameters),
        stored_as_sub_directories=bool(sd.storedAsSubDirectories),
    )


def sd_to_thrift(sd: StorageDescriptor) -> Any:
    serde = sd.serde_info
    return hms.StorageDescriptor(
        cols=[field_to_thrift(c) for c in sd.cols],
        location=sd.location,
        inputFormat=sd.input_format,
        outputFormat=sd.output_format,
        compressed=sd.compressed,
        numBuckets=sd.num_buckets,
        serdeInfo=serde_to_thrift(serde) if serde is not None else hms.SerDeInfo(parameters={}),
        bucketCols=list(sd.bucket_cols),
        sortCols=[hms.Order(col=o.col, order=o.order) for o in sd.sort_cols],
        parameters=dict(sd.parameters),
        # Hive clients dereference skewedInfo without a null check: always send an empty one.
        skewedInfo=hms.SkewedInfo(skewedColNames=[], skewedColValues=[], skewedColValueLocationMaps={}),
        storedAsSubDirectories=sd.stored_as_sub_directories,
    )


def database_from_thrift(db: Any) -> Database:
    return Database(
        name=db.name,
        description=db.description,
        location_uri=db.locationUri,
        parameters=_params(db.parameters),
        owner_name=db.ownerName,
        owner_type=PRINCIPAL_FROM_THRIFT.get(db.ownerType, PrincipalType.USER),
        managed_location_uri=db.managedLocationUri or None,
    )


def database_to_thrift(db: Database) -> Any:
    return hms.Database(
        name=db.name,
        description=db.description,
        locationUri=db.location_uri,
        parameters=dict(db.parameters),
        ownerName=db.owner_name,
        ownerType=PRINCIPAL_TO_THRIFT.get(db.owner_type or PrincipalType.USER, 1),
        catalogName=CATALOG,
        managedLocationUri=db.managed_location_uri,
    )


def table_from_thrift(t: Any) -> Table:
    table_type = t.tableType or TableType.MANAGED_TABLE.value
    return Table(
        db_name=t.dbName,
        table_name=t.tableName,
        owner=t.owner,
        create_time=t.createTime or 0,
        last_access_time=t.lastAccessTime or 0,
        retention=t.retention or 0,
        sd=sd_from_thrift(t.sd),
        partition_keys=[field_from_thrift(k) for k in t.partitionKeys or []],
        parameters=_params(t.parameters),
        view_original_text=t.viewOriginalText,
        view_expanded_text=t.viewExpandedText,
        table_type=TableType(table_type) if table_type in TableType.__members__ else TableType.MANAGED_TABLE,
        temporary=bool(t.temporary),
    )


def table_to_thrift(t: Table) -> Any:
    return hms.Table(
        tableName=t.table_name,
        dbName=t.db_name,
        owner=t.owner,
        createTime=t.create_time,
        lastAccessTime=t.last_access_time,
        retention=t.retention,
        sd=sd_to_thrift(t.sd),
        partitionKeys=[field_to_thrift(k) for k in t.partition_keys],
        parameters=dict(t.parameters),
        viewOriginalText=t.view_original_text,
        viewExpandedText=t.view_expanded_text,
        tableType=str(t.table_type),
        temporary=t.temporary,
        catName=CATALOG,
        ownerType=1,
        writeId=t.write_id,
        id=t.id,
    )


def partition_from_thrift(p: Any, db_name: str | None = None, table_name: str | None = None) -> Partition:
    return Partition(
        values=list(p.values or []),
        db_name=p.dbName or db_name or "",
        table_name=p.tableName or table_name or "",
        create_time=p.createTime or 0,
        last_access_time=p.lastAccessTime or 0,
        sd=sd_from_thrift(p.sd),
        parameters=_params(p.parameters),
    )


def partition_to_thrift(p: Partition) -> Any:
    return hms.Partition(
        values=list(p.values),
        dbName=p.db_name,
        tableName=p.table_name,
        createTime=p.create_time,
        lastAccessTime=p.last_access_time,
        sd=sd_to_thrift(p.sd),
        parameters=dict(p.parameters),
        catName=CATALOG,
        writeId=p.write_id,
    )


def function_from_thrift(f: Any) -> Function:
    return Function(
        function_name=f.functionName,
        db_name=f.dbName,
        class_name=f.className,
        owner_name=f.ownerName,
        owner_type=PRINCIPAL_FROM_THRIFT.get(f.ownerType, PrincipalType.USER),
        create_time=f.createTime or 0,
        function_type=f.functionType or 1,
        resource_uris=[
            ResourceUri(resource_type=RESOURCE_FROM_THRIFT.get(r.resourceType, "JAR"), uri=r.uri)
            for r in f.resourceUris or []
        ],
    )


def function_to_thrift(f: Function) -> Any:
    return hms.Function(
        functionName=f.function_name,
        dbName=f.db_name,
        className=f.class_name,
        ownerName=f.owner_name,
        ownerType=PRINCIPAL_TO_THRIFT.get(f.owner_type or PrincipalType.USER, 1),
        createTime=f.create_time,
        functionType=f.function_type,
        resourceUris=[
            hms.ResourceUri(resourceType=RESOURCE_TO_THRIFT.get(r.resource_type, 1), uri=r.uri)
            for r in f.resource_uris
        ],
        catName=CATALOG,
    )


# A stored partition document is ``Partition.model_dump_json()``: keys in field order, no spaces, so its
# columns are the text between these two markers ("cols" is the storage descriptor's first field and
# "location" its second; a quote inside a string value is escaped, so neither marker occurs in one).
_COLS_START = '"sd":{"cols":'
_COLS_END = ',"location":'


class PartitionDocs:
    """Thrift ``Partition`` structs built straight from stored partition documents, for database reads.

    The database keeps each partition as the JSON of a validated ``Partition`` model. Reading it back
    through the model (pydantic parse, a copy with the row's write id, then ``partition_to_thrift``) walks
    ~20 objects per partition three times, which made a 1,000-partition ``get_partitions`` slower than
    Hive's. This builds the same structs from the JSON in one pass with the model's defaults and
    normalisation. The column list, two thirds of a document and nearly always the same for all
    partitions of a table, is parsed once per distinct text. One instance per reply: the ``FieldSchema``
    structs it shares between that reply's partitions are never handed to a later caller.
    """

    __slots__ = ("_cols",)

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {}

    def __call__(self, doc: str, write_id: int) -> Any:
        """The struct ``partition_to_thrift`` gives for the document's model with ``write_id``."""
        start = doc.find(_COLS_START)
        end = doc.find(_COLS_END, start) if start >= 0 else -1
        if end < 0:  # not a pydantic dump (written by hand?): parse it whole
            part = json.loads(doc)
            cols = _columns((part.get("sd") or {}).get("cols") or [])
        else:
            start += len(_COLS_START)
            part = json.loads(f"{doc[:start]}[]{doc[end:]}")
            cols = self._columns(doc[start:end])
        return hms.Partition(
            values=list(part["values"]),
            dbName=part["db_name"].lower(),
            tableName=part["table_name"].lower(),
            createTime=part.get("create_time", 0),
            lastAccessTime=part.get("last_access_time", 0),
            sd=_sd_from_doc(part.get("sd") or {}, cols),
            parameters=dict(part.get("parameters") or {}),
            catName=CATALOG,
            writeId=write_id,
        )

    def _columns(self, text: str) -> list[Any]:
        """A new list per partition, of ``FieldSchema`` structs built once per distinct column text."""
        shared = self._cols.get(text)
        if shared is None:
            shared = self._cols[text] = _columns(json.loads(text))
        return list(shared)


def _columns(cols: list[dict[str, Any]]) -> list[Any]:
    return [hms.FieldSchema(name=c["name"].lower(), type=c["type"], comment=c.get("comment")) for c in cols]


def _sd_from_doc(sd: dict[str, Any], cols: list[Any]) -> Any:
    """``sd_to_thrift`` of a stored storage descriptor, from its JSON (defaults as in the model)."""
    serde = sd.get("serde_info")
    return hms.StorageDescriptor(
        cols=cols,
        location=sd.get("location"),
        inputFormat=sd.get("input_format"),
        outputFormat=sd.get("output_format"),
        compressed=sd.get("compressed", False),
        numBuckets=sd.get("num_buckets", -1),
        serdeInfo=hms.SerDeInfo(
            name=serde.get("name"),
            serializationLib=serde.get("serialization_lib"),
            parameters=dict(serde.get("parameters") or {}),
            description=serde.get("description"),
            serializerClass=serde.get("serializer_class"),
            deserializerClass=serde.get("deserializer_class"),
            serdeType=serde.get("serde_type"),
        )
        if serde is not None
        else hms.SerDeInfo(parameters={}),
        bucketCols=list(sd.get("bucket_cols") or []),
        sortCols=[hms.Order(col=o["col"], order=o.get("order", 1)) for o in sd.get("sort_cols") or []],
        parameters=dict(sd.get("parameters") or {}),
        skewedInfo=hms.SkewedInfo(skewedColNames=[], skewedColValues=[], skewedColValueLocationMaps={}),
        storedAsSubDirectories=sd.get("stored_as_sub_directories", False),
    )
