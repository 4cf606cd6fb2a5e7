"""The methods of Hive 4's metastore service this server does not serve, each with the reason a client is given.

The reference is Hive 4's service as Apache Thrift generated it for a maintained library (pyiceberg's
``hive_metastore`` package, with fb303's ``FacebookService``), read at test time: every method of it is either
served by an API area of the handler (its ``DISPATCH`` table) or listed here, and this table names only
methods of it. ``tests/unit/test_idl_walk.py`` fails on a method in neither or in both, so a method that
starts being served must leave this table.

Our own IDL (``hive_metastore.thrift``) declares only the served methods. thriftpy2's processor skips the
arguments of a method it does not know and reports it unknown; the server (``thrift.server``) answers it as
a Hive metastore answers a method it does not have: a ``TApplicationException`` of type ``UNKNOWN_METHOD``,
with the reason from this table, and the connection goes on serving. Hive's own client, Trino and Spark read
exactly that type as "older metastore" and fall back to the classic call where they have one
(``get_table_req`` -> ``get_table``, ``get_partitions_by_expr`` -> a filter, ...); a ``MetaException`` would
end the query instead. The message names the method and says why, and what to call instead where there is
something.
"""

from __future__ import annotations

from thriftpy2.thrift import TApplicationException


def _family(reason: str, *methods: str) -> dict[str, str]:
    return dict.fromkeys(methods, reason)


#: Method -> why it is refused (the client sees it after the method's name).
REFUSED: dict[str, str] = {
    **_family(
        "this metastore has one catalog, 'hive'; catalogs cannot be created, altered or dropped",
        "create_catalog",
        "alter_catalog",
        "drop_catalog",
    ),
    "setMetaConf": "the metastore's settings come from its own configuration (HMSREPL_*), not from a session",
    **_family(
        "data connectors (Hive 4 remote databases) are not supported",
        "create_dataconnector",
        "get_dataconnector_req",
        "drop_dataconnector",
        "get_dataconnectors",
        "alter_dataconnector",
    ),
    **_family(
        "Hive's type registry (create_type and friends) is not supported",
        "get_type",
        "create_type",
        "drop_type",
        "get_type_all",
    ),
    "translate_table_dryrun": "Hive 4's table translation (HMS transformer) is not part of this metastore",
    **_family(
        "materialized views are not supported",
        "get_all_materialized_view_objects_for_rewriting",
        "get_materialized_views_for_rewriting",
        "get_materialization_invalidation_info",
        "update_creation_metadata",
        "get_lock_materialization_rebuild",
        "heartbeat_lock_materialization_rebuild",
    ),
    "get_table_names_by_filter": "table filters are not evaluated; list with get_tables or get_table_meta",
    **_family(
        "these partition spec (PartitionSpec) calls are not served; use get_partitions_with_specs or the "
        "calls on lists of partitions",
        "add_partitions_pspec",
        "get_partitions_pspec",
        "get_part_specs_by_filter",
    ),
    **_family(
        "append_partition (a partition at its default location) is not served; call add_partition",
        "append_partition",
        "append_partition_with_environment_context",
        "append_partition_by_name",
        "append_partition_by_name_with_environment_context",
    ),
    **_family("EXCHANGE PARTITION is not supported", "exchange_partition", "exchange_partitions"),
    **_family(
        "serialized Hive expressions cannot be evaluated by this metastore; use get_partitions_by_filter or "
        "get_partition_names",
        "get_partitions_by_expr",
        "get_partitions_spec_by_expr",
    ),
    "get_partition_values": "not served; read the values from get_partition_names",
    "get_num_partitions_by_filter": "not served; count the result of get_partition_names",
    "partition_name_has_valid_characters": "not served; this metastore accepts any partition value",
    **_family(
        "partition event marks (LOAD_DONE) are not supported",
        "markPartitionForEvent",
        "isPartitionMarkedForEvent",
    ),
    "update_transaction_statistics": "not served; statistics of transactional tables come with their writes",
    "alter_function": "functions cannot be altered; drop the function and create it again",
    **_family(
        "roles and privileges are not managed by this metastore: it runs as Hive does without SQL-standard "
        "authorization (roles admin and public only, no grants); its access rules are its own "
        "(HMSREPL_ADMIN_USERS, Kerberos, replica protection)",
        "create_role",
        "drop_role",
        "grant_role",
        "revoke_role",
        "grant_revoke_role",
        "grant_privileges",
        "revoke_privileges",
        "grant_revoke_privileges",
        "refresh_privileges",
    ),
    **_family(
        "delegation tokens are not issued: each connection authenticates with Kerberos (SASL)",
        "get_delegation_token",
        "renew_delegation_token",
        "cancel_delegation_token",
        "add_token",
        "remove_token",
        "get_token",
        "get_all_token_identifiers",
        "add_master_key",
        "update_master_key",
        "remove_master_key",
        "get_master_keys",
    ),
    **_family(
        "a transaction-manager internal of Hive's own services; not served to clients",
        "get_open_txns_info",
        "get_latest_txnid_in_conflict",
        "repl_tbl_writeid_state",
        "get_max_allocated_table_write_id",
        "seed_write_id",
        "seed_txn_id",
        "add_dynamic_partitions",
        "get_all_write_event_info",
    ),
    **_family(
        "Hive's compactor worker API: compactions run inside this metastore, not in Hive workers",
        "find_next_compact",
        "find_next_compact2",
        "update_compactor_state",
        "find_columns_with_stats",
        "mark_cleaned",
        "mark_compacted",
        "mark_failed",
        "mark_refused",
        "update_compaction_metrics_data",
        "remove_compaction_metrics_data",
        "set_hadoop_jobid",
        "get_latest_committed_compaction_info",
    ),
    "flushCache": "not served; the metadata cache follows the notification log by itself",
    **_family(
        "ACID writes are logged when their transaction commits (commit_txn)",
        "add_write_notification_log",
        "add_write_notification_log_in_batch",
    ),
    "cm_recycle": "the change manager keeps replaced and dropped files itself",
    **_family(
        "the file metadata cache (ORC footers) is not supported",
        "get_file_metadata_by_expr",
        "get_file_metadata",
        "put_file_metadata",
        "clear_file_metadata",
        "cache_file_metadata",
    ),
    "get_metastore_db_uuid": "not served",
    **_family(
        "LLAP workload management is not supported",
        "create_resource_plan",
        "get_resource_plan",
        "get_active_resource_plan",
        "get_all_resource_plans",
        "alter_resource_plan",
        "validate_resource_plan",
        "drop_resource_plan",
        "create_wm_trigger",
        "alter_wm_trigger",
        "drop_wm_trigger",
        "get_triggers_for_resourceplan",
        "create_wm_pool",
        "alter_wm_pool",
        "drop_wm_pool",
        "create_or_update_wm_mapping",
        "drop_wm_mapping",
        "create_or_drop_wm_trigger_to_pool_mapping",
    ),
    **_family(
        "Hive's schema registry (ISchema) is not supported",
        "create_ischema",
        "alter_ischema",
        "get_ischema",
        "drop_ischema",
        "add_schema_version",
        "get_schema_version",
        "get_schema_latest_version",
        "get_schema_all_versions",
        "drop_schema_version",
        "get_schemas_by_cols",
        "map_schema_version_to_serde",
        "set_schema_version_state",
        "add_serde",
        "get_serde",
    ),
    **_family("query runtime statistics are not stored", "add_runtime_stats", "get_runtime_stats"),
    **_family(
        "scheduled queries are not supported",
        "scheduled_query_poll",
        "scheduled_query_maintenance",
        "scheduled_query_progress",
        "get_scheduled_query",
    ),
    **_family(
        "Hive REPL metrics are not stored; see hmsrepl's repl status",
        "add_replication_metrics",
        "get_replication_metrics",
    ),
    **_family(
        "HPL/SQL stored procedures and packages are not supported",
        "create_stored_procedure",
        "get_stored_procedure",
        "drop_stored_procedure",
        "get_all_stored_procedures",
        "find_package",
        "add_package",
        "get_all_packages",
        "drop_package",
    ),
    **_family(
        "fb303 status, counters and options are not served (getName, getVersion and shutdown are)",
        "getStatus",
        "getStatusDetails",
        "getCounters",
        "getCounter",
        "setOption",
        "getOption",
        "getOptions",
        "getCpuProfile",
        "aliveSince",
        "reinitialize",
    ),
}

_UNLISTED = "not served"


def refusal(method: str) -> TApplicationException:
    """What a call of ``method`` is answered with: Hive's unknown-method error, naming the method and why."""
    reason = REFUSED.get(method, _UNLISTED)
    return TApplicationException(
        TApplicationException.UNKNOWN_METHOD,
        f"method '{method}' is not supported by this metastore (hmsrepl): {reason}",
    )
