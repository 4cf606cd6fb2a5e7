"""How each method of the Thrift API is held to the protection rule: the table its coverage test checks.

The rule (``metastore.protection``): a write whose before-state or after-state names a protected database (a
replica, a source frozen for a failover) is refused in the same transaction. It is enforced in three places,
none of them a handler method:

- ``check_writable`` when a write transaction commits, and ``check_crossing`` when it logs an event, judge
  every database the write's events name, before and after (renames, cascades, ``fire_listener_event``,
  write ids: every catalog, statistics and ACID write logs an event naming its database);
- ``check_write_locks`` when a lock is requested: a write lock logs no event, so it is judged on its own;
- ``check_queued_request`` when a compaction is requested, for the same reason;
- methods that change no database's state (sessions, leases, transactions before they write) need none.

Every method of Hive 4's service (as pyiceberg publishes it, and of our own IDL) that is not refused by name
(``thrift.refusals``: a refused call changes nothing) must sit in exactly one of the tables below, so a method
that starts being served, or a new one in an updated IDL, fails ``tests/unit/test_protection_coverage.py``
until someone says how the rule covers it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hmsrepl.metastore.events import EventType as E
from hmsrepl.thrift.refusals import REFUSED

#: Writes judged on their events, with the event types each one logs.
EVENT_WRITES: dict[str, tuple[E, ...]] = {
    "create_database": (E.CREATE_DATABASE,),
    "alter_database": (E.ALTER_DATABASE,),
    "drop_database": (E.DROP_DATABASE, E.DROP_TABLE, E.DROP_FUNCTION),  # a cascade logs each object
    "create_database_req": (E.CREATE_DATABASE,),
    "alter_database_req": (E.ALTER_DATABASE,),
    "drop_database_req": (E.DROP_DATABASE, E.DROP_TABLE, E.DROP_FUNCTION),
    "create_table": (E.CREATE_TABLE,),
    "create_table_with_environment_context": (E.CREATE_TABLE,),
    "create_table_with_constraints": (E.CREATE_TABLE,),
    "create_table_req": (E.CREATE_TABLE,),
    "drop_table_req": (E.DROP_TABLE,),
    "add_primary_key": (E.ALTER_TABLE,),
    "add_foreign_key": (E.ALTER_TABLE,),
    "add_unique_constraint": (E.ALTER_TABLE,),
    "add_not_null_constraint": (E.ALTER_TABLE,),
    "add_default_constraint": (E.ALTER_TABLE,),
    "add_check_constraint": (E.ALTER_TABLE,),
    "drop_constraint": (E.ALTER_TABLE,),
    "alter_table": (E.ALTER_TABLE,),  # a rename into or out of a database names both
    "alter_table_with_environment_context": (E.ALTER_TABLE,),
    "alter_table_with_cascade": (E.ALTER_TABLE, E.ALTER_PARTITION),
    "alter_table_req": (E.ALTER_TABLE,),
    # an emptied table or partition is an ALTER with an empty change; a transactional one commits a write id
    "truncate_table": (E.ALTER_TABLE, E.ALTER_PARTITION, E.ALLOC_WRITE_ID, E.COMMIT_TXN),
    # with a writeId: an ACID write joining the client's transaction (its commit is judged like any other)
    "truncate_table_req": (E.ALTER_TABLE, E.ALTER_PARTITION, E.ALLOC_WRITE_ID, E.COMMIT_TXN, E.ACID_WRITE),
    "drop_table": (E.DROP_TABLE,),
    "drop_table_with_environment_context": (E.DROP_TABLE,),
    "add_partition": (E.ADD_PARTITION,),
    "add_partition_with_environment_context": (E.ADD_PARTITION,),
    "add_partitions": (E.ADD_PARTITION,),
    "add_partitions_req": (E.ADD_PARTITION,),
    "alter_partition": (E.ALTER_PARTITION,),
    "alter_partition_with_environment_context": (E.ALTER_PARTITION,),
    "alter_partitions": (E.ALTER_PARTITION,),
    "alter_partitions_with_environment_context": (E.ALTER_PARTITION,),
    "rename_partition": (E.ALTER_PARTITION,),
    "alter_partitions_req": (E.ALTER_PARTITION,),
    "rename_partition_req": (E.ALTER_PARTITION,),
    "drop_partition": (E.DROP_PARTITION,),
    "drop_partition_by_name": (E.DROP_PARTITION,),
    "drop_partition_with_environment_context": (E.DROP_PARTITION,),
    "drop_partitions_req": (E.DROP_PARTITION,),
    "drop_partition_req": (E.DROP_PARTITION,),
    "drop_partition_by_name_with_environment_context": (E.DROP_PARTITION,),
    "create_function": (E.CREATE_FUNCTION,),
    "drop_function": (E.DROP_FUNCTION,),
    "fire_listener_event": (E.INSERT,),
    "update_table_column_statistics": (E.UPDATE_TABLE_COLUMN_STAT,),
    "update_partition_column_statistics": (E.UPDATE_PARTITION_COLUMN_STAT,),
    "set_aggr_stats_for": (E.UPDATE_TABLE_COLUMN_STAT, E.UPDATE_PARTITION_COLUMN_STAT),
    "update_table_column_statistics_req": (E.UPDATE_TABLE_COLUMN_STAT,),
    "update_partition_column_statistics_req": (E.UPDATE_PARTITION_COLUMN_STAT,),
    "delete_table_column_statistics": (E.DELETE_TABLE_COLUMN_STAT,),
    "delete_partition_column_statistics": (E.DELETE_PARTITION_COLUMN_STAT,),
    "allocate_table_write_ids": (E.ALLOC_WRITE_ID,),
    "commit_txn": (E.COMMIT_TXN, E.ACID_WRITE),
    "abort_txn": (E.ABORT_TXN,),
    "abort_txns": (E.ABORT_TXN,),
}

#: Writes judged when they are requested (``protection.check_write_locks``).
LOCK_WRITES: frozenset[str] = frozenset({"lock"})

#: Requests that queue work on a database, judged when made (``protection.check_queued_request``).
QUEUED_WRITES: dict[str, str] = {
    "compact": "queues a compaction (Hive 2/3 clients' void form of compact2)",
    "compact2": "queues a compaction; the worker's commit logs no event naming the database",
}

#: Writes of state that belongs to no database, each with the reason the rule has nothing to judge.
NO_DATABASE_STATE: dict[str, str] = {
    "open_txns": "a new transaction names no database until it allocates write ids (judged then)",
    "heartbeat": "renews a lease the caller already holds",
    "heartbeat_txn_range": "renews transactions' leases",
    "unlock": "releases a lock the caller holds",
    "set_ugi": "names the session's user",
    "shutdown": "stops the serving process, changes no catalog state",
}

#: Methods that change nothing.
READS: frozenset[str] = frozenset(
    {
        "check_lock",
        "getMetaConf",
        "getName",
        "getVersion",
        "get_aggr_stats_for",
        "get_all_databases",
        "get_all_functions",
        "get_all_tables",
        "get_catalog",
        "get_catalogs",
        "get_check_constraints",
        "get_all_table_constraints",
        "get_config_value",
        "get_current_notificationEventId",
        "get_database",
        "get_database_req",
        "get_databases",
        "get_default_constraints",
        "get_fields",
        "get_fields_with_environment_context",
        "get_fields_req",
        "fetch_partition_names_req",
        "get_partitions_by_filter_req",
        "get_role_names",
        "list_roles",
        "get_principals_in_role",
        "get_role_grants_for_principal",
        "get_privilege_set",
        "list_privileges",
        "get_schema_req",
        "get_partition_names_ps_req",
        "get_partitions_ps_with_auth_req",
        "get_open_txns_req",
        "get_foreign_keys",
        "get_function",
        "get_functions",
        "get_next_notification",
        "get_not_null_constraints",
        "get_notification_events_count",
        "get_open_txns",
        "get_partition",
        "get_partition_by_name",
        "get_partition_column_statistics",
        "get_partition_names",
        "get_partition_names_ps",
        "get_partition_req",
        "get_partition_with_auth",
        "get_partitions",
        "get_partitions_by_filter",
        "get_partitions_by_names",
        "get_partitions_by_names_req",
        "get_partitions_ps",
        "get_partitions_ps_with_auth",
        "get_partitions_req",
        "get_partitions_with_specs",
        "get_partition_names_req",
        "get_partitions_statistics_req",
        "get_partitions_with_auth",
        "get_primary_keys",
        "get_schema",
        "get_schema_with_environment_context",
        "get_table",
        "get_table_column_statistics",
        "get_table_meta",
        "get_table_objects_by_name",
        "get_table_objects_by_name_req",
        "get_table_req",
        "get_table_statistics_req",
        "get_tables",
        "get_tables_by_type",
        "get_tables_ext",
        "get_unique_constraints",
        "get_valid_write_ids",
        "partition_name_to_spec",
        "partition_name_to_vals",
        "show_compact",
        "show_locks",
    }
)


def coverage(method: str) -> list[str]:
    """The tables ``method`` sits in (exactly one for a covered method)."""
    tables = {
        "EVENT_WRITES": method in EVENT_WRITES,
        "LOCK_WRITES": method in LOCK_WRITES,
        "QUEUED_WRITES": method in QUEUED_WRITES,
        "NO_DATABASE_STATE": method in NO_DATABASE_STATE,
        "READS": method in READS,
    }
    return [name for name, present in tables.items() if present]


def uncovered(methods: Iterable[str]) -> list[str]:
    """The methods of an API, less those refused by name, that no table or more than one accounts for: each
    one a finding."""
    return sorted(method for method in methods if method not in REFUSED and len(coverage(method)) != 1)
