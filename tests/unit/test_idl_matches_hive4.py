"""Every struct and call our IDL declares puts its fields where Hive 4 does: same field ids, same wire types.

The reference is Hive 4's service as pyiceberg publishes it (``tests.hive4_reference``), read at test time.
For every struct, union and exception our IDL declares that Hive 4 also has, and for the arguments and
result of every method we declare, each field we declare must have Hive 4's id and wire type (names are not
on the wire). The intended differences are listed below, each with why; a planted wrong field id shows that
the check fails.
"""

from __future__ import annotations

import inspect

import pytest
from thriftpy2.thrift import TType

from hmsrepl.thrift.idl import Service, hms
from tests import hive4_reference

#: (struct, field id) whose wire type is not Hive 4's, on purpose.
DIFFERENT_TYPE = {
    # Hive 2.3's shape, what Spark's built-in client sends with every INSERT event: files at 1 (Hive 3 moved
    # them to 2 and put 'bool replace' at 1). Ids 2-4 are list<string> in both shapes; a Hive 3/4 client's
    # files then arrive at 2, and the handler tells the two shapes apart (``thrift.hive3_insert``).
    ("InsertEventRequestData", 1),
    # pyiceberg's revision has 'string type'; Hive 4.2.0, whose HiveMetaStoreClient.createDatabase sends this
    # request (create_database_req, a method that revision lacks), has the DatabaseType enum (an i32), as we
    # do: tests/integration/test_hive4_jvm_client.py runs that client.
    ("CreateDatabaseRequest", 11),
}

#: Fields we declare that pyiceberg's bindings lack: its Hive 4 revision predates them (Hive 4.0's release
#: added them); clients that do not know them skip them.
NEWER_THAN_REFERENCE = {
    "ShowCompactRequest": {1, 2, 3, 4, 5, 6, 7, 8, 9},  # Hive 4.0's filters (id, pool, db, table, ...)
    "ShowCompactResponseElement": {21, 22, 24},  # nextTxnId, txnId, hightestWriteId
}

#: Hive 4's fields this server does not declare: a client's value is skipped on decode and never answered.
#: Each is a feature not served (or not yet); declaring one makes this list shrink, never grow silently.
NOT_DECLARED = {
    "AbortTxnRequest": {3},  # txn_type
    # Hive 4 request forms (``thrift.api.requests``): what the classic call does not act on either.
    "AlterPartitionsRequest": {7},  # validWriteIdList
    "AlterTableRequest": {7, 8, 9},  # validWriteIdList, processorCapabilities, processorIdentifier
    "CreateDatabaseRequest": {9},  # createTime (the metastore's own)
    "CreateTableRequest": {9, 10},  # processorCapabilities, processorIdentifier
    "DropDatabaseRequest": {6, 7, 8},  # softDelete, txnId, deleteManagedDir (Hive's lockless reads)
    "RenamePartitionRequest": {6, 7, 8},  # validWriteIdList, txnId, clonePart
    "CommitTxnRequest": {4, 5, 6, 7},  # replLastIdInfo, keyValue, exclWriteEnabled, txn_type
    "CompactionRequest": {7, 8},  # initiatorId, initiatorVersion
    "Database": {9, 11, 12, 13},  # createTime, type, connector_name, remote_dbname (data connectors)
    "GetPartitionsByNamesRequest": {
        4,
        5,
        6,
        7,
        9,
    },  # get_col_stats, processorCapabilities, ..., getFileMetadata
    "GetPartitionsByNamesResult": {2},  # dictionary
    "GetTablesRequest": {7},  # projectionSpec
    "OpenTxnRequest": {7},  # txn_type
    "Partition": {12, 13},  # colStats, fileMetadata
    "ShowCompactResponseElement": {
        16,
        17,
        18,
        19,
    },  # workerVersion, initiatorId, initiatorVersion, cleanerStart
    # creationMetadata, colStats, accessType, requiredRead/WriteCapabilities, fileMetadata, dictionary, txnId
    "Table": {16, 21, 22, 23, 24, 26, 27, 28},
}


def wire(cls: type) -> dict[int, int]:
    """A thriftpy2 struct's {field id: wire type} (thriftpy2 marks ``binary`` apart; on the wire it is a string)."""
    return {
        fid: TType.STRING if entry[0] == TType.BINARY else entry[0] for fid, entry in cls.thrift_spec.items()
    }


def differences(name: str, mine: dict[int, int], reference: dict[int, int]) -> list[str]:
    """Each field of ``name`` that is not Hive 4's and not listed as intended: one line per finding."""
    found = []
    newer = NEWER_THAN_REFERENCE.get(name, set())
    for fid, wire_type in sorted(mine.items()):
        if fid not in reference:
            if fid not in newer:
                found.append(f"{name}.{fid}: not in Hive 4")
        elif wire_type != reference[fid] and (name, fid) not in DIFFERENT_TYPE:
            found.append(f"{name}.{fid}: wire type {wire_type}, Hive 4 has {reference[fid]}")
    missing = sorted(set(reference) - set(mine))
    if missing != sorted(NOT_DECLARED.get(name, ())):
        found.append(
            f"{name}: Hive 4's fields {missing} not declared, listed {sorted(NOT_DECLARED.get(name, ()))}"
        )
    return found


def _reference_wire(cls: type) -> dict[int, int]:
    return {fid: wire_type for fid, (_, wire_type) in hive4_reference.fields(cls.thrift_spec).items()}


def _our_structs() -> dict[str, type]:
    return {name: v for name, v in vars(hms).items() if inspect.isclass(v) and hasattr(v, "thrift_spec")}


SHARED_STRUCTS = sorted(set(_our_structs()) & set(hive4_reference.structs()))
CALLS = sorted(
    (method, suffix)
    for method in Service.thrift_services
    for suffix in ("_args", "_result")
    if hive4_reference.call_struct(method, suffix) is not None
)


#: Structs we declare that pyiceberg's Hive 4 revision lacks: Hive 4.2's, with its generated classes' field ids
#: and types, proven by the Hive 4.2.0 client in tests/integration/test_hive4_jvm_client.py.
NEWER_STRUCTS = {
    "DropTableRequest",  # drop_table_req: HiveMetaStoreClient.dropTable
    "AlterDatabaseRequest",  # alter_database_req: alterDatabase
    "GetPartitionsByFilterRequest",  # get_partitions_by_filter_req: listPartitionsByFilter
    "DropPartitionRequest",  # drop_partition_req: dropPartition
}


def test_most_of_our_idl_is_checked() -> None:
    assert sorted(set(_our_structs()) - set(SHARED_STRUCTS)) == sorted(NEWER_STRUCTS)  # the rest is Hive 4's
    assert len(SHARED_STRUCTS) > 100
    assert len(CALLS) > 200


@pytest.mark.parametrize("name", SHARED_STRUCTS)
def test_struct_fields_have_hive_4s_ids_and_wire_types(name: str) -> None:
    reference = _reference_wire(hive4_reference.structs()[name])
    assert differences(name, wire(getattr(hms, name)), reference) == []


@pytest.mark.parametrize(("method", "suffix"), CALLS)
def test_call_fields_have_hive_4s_ids_and_wire_types(method: str, suffix: str) -> None:
    reference = _reference_wire(hive4_reference.call_struct(method, suffix))
    assert differences(method + suffix, wire(getattr(Service, method + suffix)), reference) == []


def test_the_allow_lists_name_only_shared_structs() -> None:
    listed = {name for name, _ in DIFFERENT_TYPE} | set(NEWER_THAN_REFERENCE) | set(NOT_DECLARED)
    assert sorted(listed - set(SHARED_STRUCTS)) == []


def test_a_planted_wrong_field_id_or_type_is_found() -> None:
    reference = _reference_wire(hive4_reference.structs()["Table"])
    mine = wire(hms.Table)
    assert differences("Table", mine, reference) == []
    planted = dict(mine)
    planted[29] = planted.pop(25)  # a field moved to an id Hive 4 does not have
    assert differences("Table", planted, reference) == [
        "Table.29: not in Hive 4",
        "Table: Hive 4's fields [16, 21, 22, 23, 24, 25, 26, 27, 28] not declared, listed "
        "[16, 21, 22, 23, 24, 26, 27, 28]",
    ]
    planted = {**mine, 4: TType.I64}  # createTime declared i64 where Hive 4 has i32
    assert differences("Table", planted, reference) == ["Table.4: wire type 10, Hive 4 has 8"]


#: Enum values we declare that pyiceberg's older Hive 4 revision lacks: Hive 4.0 added REBALANCE = 3, declared
#: so that a request for it is refused by name (``thrift.compactions``).
NEWER_ENUM_VALUES = {("CompactionType", 3, "REBALANCE")}


def _our_enums() -> dict[str, type]:
    return {name: v for name, v in vars(hms).items() if inspect.isclass(v) and hasattr(v, "_VALUES_TO_NAMES")}


@pytest.mark.parametrize("name", sorted(_our_enums()))
def test_enum_values_are_hive_4s(name: str) -> None:
    mine = set(getattr(hms, name)._VALUES_TO_NAMES.items())
    reference = set(hive4_reference.enum(name)._VALUES_TO_NAMES.items())
    assert mine - reference == {(value, label) for enum, value, label in NEWER_ENUM_VALUES if enum == name}
    assert reference <= mine
