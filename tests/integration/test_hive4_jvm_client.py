"""Hive 4's own Java client (``HiveMetaStoreClient`` of Hive 4.2.0, ``tests.peers.hive4_client``) against this
metastore: its DDL (which Hive 4.2 sends as ``create_database_req``, ``alter_database_req``, ``create_table_req``,
``alter_table_req``, ``truncate_table_req``, ``drop_table_req``, ``drop_database_req``), partition calls
(``fetch_partition_names_req``, ``get_partitions_by_filter_req``, ``drop_partition_req``,
``get_partitions_with_specs`` and ``get_partition_names_req`` among them), table and
field reads, a transaction, and role and privilege reads all work, and what it stores is what a Hive 4 client
asked for: the database's managed location holds the table, the SerDe's description is kept.

The jars are the Hive 4 metastore peer's (``tests.peers.hive_metastore.HIVE_4``, fetched from Maven Central
into ``var/peers`` on first use); one JVM run of ~4 s on a quiet machine.
"""

from __future__ import annotations

import uuid

from hmsrepl.metastore import Metastore
from tests.peers import hive4_client
from tests.servers import RunningMetastore


def test_hive_4s_own_client_runs_its_ddl_and_reads(
    session_metastore: RunningMetastore, session_store: Metastore
) -> None:
    db = f"jvm4_{uuid.uuid4().hex[:8]}"
    steps = hive4_client.run(session_metastore.uri, session_metastore.warehouse, db)
    failed = {name: step.value for name, step in steps.items() if not step.ok}
    assert failed == {}
    managed = f"file:{session_metastore.warehouse}/managed/{db}.db"
    assert steps["create_database"].value == managed
    assert steps["create_table"].value == f"{managed}/t text rows"  # below the managed location, SerDe kept
    assert steps["alter_table"].value == "altered"
    assert (steps["get_fields"].value, steps["get_schema"].value) == ("2", "3")
    assert steps["add_partition"].value == "[ds=1]"
    assert steps["alter_partitions"].value == "v"
    for read in (
        "list_partitions_ps",
        "get_partitions_by_names",
        "list_partitions",
        "list_partitions_by_filter",
    ):
        assert steps[read].value == "1", read
    assert steps["get_partitions_with_specs"].value == "/ds=1"  # relative to the shared descriptor's root
    assert steps["list_partition_names_req"].value == "[ds=1]"
    assert steps["alter_database"].value == "data"
    assert steps["get_config_value"].value == session_metastore.warehouse
    assert steps["drop_partition"].value == "true"
    assert steps["list_role_names"].value == "[admin, public]"
    assert steps["list_roles"].value == "[public]"
    assert steps["get_privilege_set"].value == "{public=[]}"
    assert steps["drop_table"].value == "[]"
    assert steps["drop_database"].value == "false"
    assert db not in session_store.catalog.get_databases()
    events = [(e.event_type, e.table_name) for e in session_store.events.next_events(0) if e.db_name == db]
    assert events == [
        ("CREATE_DATABASE", None),
        ("CREATE_TABLE", "t"),
        ("ALTER_TABLE", "t"),
        ("ADD_PARTITION", "t"),
        ("ALTER_PARTITION", "t"),
        ("ALTER_DATABASE", None),
        ("ALTER_PARTITION", "t"),  # the truncation empties the partition
        ("DROP_PARTITION", "t"),
        ("DROP_TABLE", "t"),
        ("DROP_DATABASE", None),
    ]
