"""PySpark helpers for insert-only tables: write a DataFrame as one transactional write, read a snapshot.

Spark's own Hive integration ignores write ids (it would read open and aborted deltas alike and write
files straight into the table location), so Spark jobs go through these helpers instead: the write lands
in the txn's own delta/base directory and is committed through the metastore, and the read loads exactly
the files the snapshot's ``ValidWriteIdList`` selects. PySpark is imported inside the functions, so the
core package stays importable where Spark is not installed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING

from hmsrepl.acid.compactor import Rewriter
from hmsrepl.acid.insert_only import InsertOnlyReader, InsertOnlyWriter, WriteMode, require_insert_only
from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.formats.partition_names import DEFAULT_PARTITION_NAME
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.model import FieldSchema, Partition, Table
from hmsrepl.metastore.service import Metastore
from hmsrepl.storage.rooted import RootedFileSystem

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

FORMAT_PARAMETER = "hmsrepl.format"
"""Table parameter naming the Spark data source of the table's files; wins over the storage descriptor."""
DEFAULT_FORMAT = "parquet"

_TEXT_INPUT_FORMAT = "org.apache.hadoop.mapred.TextInputFormat"
_FORMAT_BY_INPUT_FORMAT = {
    "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat": "parquet",
    "parquet.hive.DeprecatedParquetInputFormat": "parquet",
    "parquet.hive.MapredParquetInputFormat": "parquet",
    "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat": "orc",
    "org.apache.hadoop.hive.ql.io.avro.AvroContainerInputFormat": "avro",
}
_JSON_SERDES = frozenset(
    {
        "org.apache.hive.hcatalog.data.JsonSerDe",
        "org.apache.hadoop.hive.serde2.JsonSerDe",
        "org.openx.data.jsonserde.JsonSerDe",
    }
)
_OPEN_CSV_SERDE = "org.apache.hadoop.hive.serde2.OpenCSVSerde"
_HIVE_TEXT_FIELD_DELIMITER = "\x01"  # LazySimpleSerDe's default (Ctrl-A)
_CHAR_TYPE = re.compile(r"\b(?:var)?char\s*\(\s*\d+\s*\)", re.IGNORECASE)


@dataclass(frozen=True)
class SparkFormat:
    """A Spark data source name plus the options that make its files match what Hive's SerDe expects."""

    name: str
    options: dict[str, str] = field(default_factory=dict)


def spark_format(table: Table, override: str | None = None) -> SparkFormat:
    """The Spark data source for a table's files: ``override``, else the ``hmsrepl.format`` parameter,
    else Spark's own provider parameter, else the Hive input format (and SerDe for text tables).

    A table without an input format gets parquet. An input format with no known mapping raises, because
    writing parquet into a table Hive reads as, say, sequence files would make it unreadable.
    """
    serde = table.sd.serde_info
    serde_params = serde.parameters if serde else {}
    provider = table.parameters.get("spark.sql.sources.provider", "")
    explicit = (
        override
        or table.parameters.get(FORMAT_PARAMETER)
        or (provider if provider.lower() not in ("", "hive") else None)
    )
    if explicit:
        name = explicit.strip().lower()
        return SparkFormat(name, _delimited_options(serde_params) if name == "csv" else {})
    input_format = table.sd.input_format
    if not input_format:
        return SparkFormat(DEFAULT_FORMAT)
    if input_format in _FORMAT_BY_INPUT_FORMAT:
        return SparkFormat(_FORMAT_BY_INPUT_FORMAT[input_format])
    if input_format == _TEXT_INPUT_FORMAT:
        serde_lib = serde.serialization_lib if serde else None
        if serde_lib in _JSON_SERDES:
            return SparkFormat("json")
        if serde_lib == _OPEN_CSV_SERDE:
            return SparkFormat(
                "csv",
                {
                    "sep": serde_params.get("separatorChar", ","),
                    "quote": serde_params.get("quoteChar", '"'),
                    "escape": serde_params.get("escapeChar", "\\"),
                },
            )
        return SparkFormat("csv", _delimited_options(serde_params))
    raise InvalidObjectError(
        f"table '{table.qualified_name}' stores files with input format '{input_format}', which has no "
        f"Spark data source mapping here; set the table parameter '{FORMAT_PARAMETER}' (e.g. 'parquet') "
        "or pass file_format"
    )


def _delimited_options(serde_params: dict[str, str]) -> dict[str, str]:
    """CSV options that produce and parse what LazySimpleSerDe does: no quoting, ``\\N`` for NULL."""
    sep = serde_params.get("field.delim") or serde_params.get("serialization.format")
    if not sep:
        sep = _HIVE_TEXT_FIELD_DELIMITER
    elif sep.isdigit():  # Hive reads a numeric delimiter as a byte value: '1' is Ctrl-A, '44' is ','
        sep = chr(int(sep))
    return {"sep": sep, "nullValue": "\\N", "quote": "", "emptyValue": "", "header": "false"}


def spark_type(hive_type: str) -> str:
    """A Hive column type as a Spark type string; Spark allows ``char(n)``/``varchar(n)`` in table schemas
    only, not in the read schemas and casts used here, so they become ``string``."""
    return _CHAR_TYPE.sub("string", hive_type)


def schema_ddl(columns: Sequence[FieldSchema]) -> str:
    """Spark DDL (``\\`a\\` int, ...``) for Hive columns, names quoted so any Hive name survives."""
    return ", ".join(f"`{col.name.replace('`', '``')}` {spark_type(col.type)}" for col in columns)


def conform_to_table(df: DataFrame, table: Table) -> DataFrame:
    """Select the table's data columns from ``df`` in table order, cast to the table's types.

    Positional formats (CSV) need the table's column order, and typed formats need the table's types, or
    readers applying the table schema fail or misread. Partition columns in ``df`` are dropped: the
    partition written is the one named by the caller. Missing or unknown columns raise, naming them.
    """
    by_lower: dict[str, str] = {}
    for name in df.columns:
        if name.lower() in by_lower:
            raise InvalidObjectError(
                f"the DataFrame has columns '{by_lower[name.lower()]}' and '{name}', which are the same "
                f"column for table '{table.qualified_name}' (Hive names are case-insensitive)"
            )
        by_lower[name.lower()] = name
    data_names = [col.name for col in table.sd.cols]
    missing = [name for name in data_names if name not in by_lower]
    known = set(data_names) | set(table.partition_key_names)
    extra = [name for name in df.columns if name.lower() not in known]
    if missing or extra:
        raise InvalidObjectError(
            f"the DataFrame does not match table '{table.qualified_name}' (columns {data_names}): "
            + "; ".join(
                part
                for part in (
                    f"missing {missing}" if missing else "",
                    f"not in the table {extra}" if extra else "",
                )
                if part
            )
        )
    return df.select(
        [df[by_lower[col.name]].cast(spark_type(col.type)).alias(col.name) for col in table.sd.cols]
    )


def write_insert_only(
    df: DataFrame,
    metastore: Metastore,
    db_name: str,
    table_name: str,
    partition_values: Sequence[str] | None = None,
    mode: WriteMode = "append",
    file_format: str | None = None,
) -> int:
    """Write ``df`` as one transactional append or overwrite of an insert-only table; returns the write id.

    The DataFrame is checked against the table before the txn opens. The files go into the txn's new
    delta/base directory; if the Spark job fails, the txn is aborted (its partial files stay invisible)
    and the error is re-raised.
    """
    table = metastore.catalog.get_table(db_name, table_name)
    require_insert_only(table, "write to")
    fmt = spark_format(table, file_format)
    data = conform_to_table(df, table)
    with InsertOnlyWriter(metastore, db_name, table_name, partition_values, mode=mode) as writer:
        # "append" into the empty directory the writer made: Spark must not delete or refuse it.
        data.write.format(fmt.name).options(**fmt.options).mode("append").save(writer.target_uri)
    return writer.write_id


def read_insert_only(
    spark: SparkSession,
    metastore: Metastore,
    db_name: str,
    table_name: str,
    valid_write_ids: ValidWriteIdList | None = None,
    *,
    partition_values: Sequence[str] | None = None,
    file_format: str | None = None,
) -> DataFrame:
    """A DataFrame of exactly the files visible to ``valid_write_ids`` (default: the current snapshot).

    The schema is the table's: data columns, then partition columns filled from each partition's values
    (Hive's default partition name reads as NULL). With nothing visible the result is an empty DataFrame
    with that schema. Each partition is one scan unioned with the others, which suits tens to hundreds of
    partitions.
    """
    reader = InsertOnlyReader(metastore, db_name, table_name, valid_write_ids)
    table = reader.table
    fmt = spark_format(table, file_format)
    data_ddl = schema_ddl(table.sd.cols)
    if partition_values is None:
        selected = reader.partition_files()
    else:
        chosen = metastore.catalog.get_partition(table.db_name, table.table_name, list(partition_values))
        selected = [(chosen, reader.files(partition_values))]
    frames: list[DataFrame] = []
    for part, files in selected:
        if not files:
            continue
        frame = spark.read.format(fmt.name).options(**fmt.options).schema(data_ddl).load(files)
        if part is not None:
            frame = frame.select("*", *_partition_columns(table, part))
        frames.append(frame)
    if not frames:
        return spark.createDataFrame([], schema_ddl([*table.sd.cols, *table.partition_keys]))
    return reduce(lambda left, right: left.unionByName(right), frames)


def _partition_columns(table: Table, part: Partition) -> list[Column]:
    from pyspark.sql import functions as F

    return [
        F.lit(None if value == DEFAULT_PARTITION_NAME else value).cast(spark_type(key.type)).alias(key.name)
        for key, value in zip(table.partition_keys, part.values, strict=True)
    ]


def spark_rewriter(spark: SparkSession, *, target_file_bytes: int = 128 * 1024 * 1024) -> Rewriter:
    """A compaction ``Rewriter`` that reads the inputs in the table's format and writes them as few files.

    The number of output files is the inputs' total size over ``target_file_bytes`` (at least one), so a
    partition of hundreds of small appends becomes one file. Rows are written as read, columns conformed to
    the table's schema as any insert-only write is.
    """

    def rewrite(table: Table, inputs: Sequence[str], target: str, fs: RootedFileSystem) -> None:
        if not inputs:
            return
        fmt = spark_format(table)
        fs.check(target, follow=False)  # Spark writes it: only below the metastore's roots
        total = sum(status.size for uri in inputs if (status := fs.status(uri)) is not None)
        files = max(1, -(-total // target_file_bytes))
        frame = (
            spark.read.format(fmt.name)
            .options(**fmt.options)
            .schema(schema_ddl(table.sd.cols))
            .load(list(inputs))
        )
        frame.coalesce(files).write.format(fmt.name).options(**fmt.options).mode("append").save(target)

    return rewrite
