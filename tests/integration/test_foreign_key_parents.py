"""Other tables' foreign keys follow their parent table as Hive's metastore keeps them (its keys point at the
parent's row): a rename carries them to the new name, in the same and in another database; a drop removes
them with the parent (``ObjectStore.dropTable`` deletes every constraint whose parent it is). Each child's
change is an ALTER_TABLE in the parent's transaction, so a replica's keys follow too.
"""

from __future__ import annotations

import pytest

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.constraints import ForeignKey, PrimaryKey, TableConstraints
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import REPLICA_OF, privileged
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from tests.helpers import events_of, make_table
from tests.integration.test_replication import bootstrap, incremental


def _keys(store: Metastore, db: str, table: str) -> list[tuple[str, str | None, str]]:
    constraints = store.catalog.get_table(db, table).constraints or TableConstraints()
    return [(k.name, k.parent_db, k.parent_table) for k in constraints.foreign_keys]


def _seed(store: Metastore) -> None:
    """sales.customers (pk) <- sales.orders (fk), sales.returns (fk) and crm.visits (fk, another database);
    sales.customers also refers to itself (a referral)."""
    store.catalog.create_database(Database(name="sales"))
    store.catalog.create_database(Database(name="crm"))
    pk = TableConstraints(
        primary_key=PrimaryKey(name="customers_pk", columns=["id"]),
        foreign_keys=[
            ForeignKey(name="referral_fk", columns=["name"], parent_table="customers", parent_columns=["id"])
        ],
    )
    store.catalog.constraints.create_table_with_constraints(make_table("sales", "customers"), pk)
    for db, table, parent_db in (
        ("sales", "orders", None),
        ("sales", "returns", None),
        ("crm", "visits", "sales"),
    ):
        key = ForeignKey(
            name=f"{table}_fk",
            columns=["id"],
            parent_db=parent_db,
            parent_table="customers",
            parent_columns=["id"],
        )
        store.catalog.constraints.create_table_with_constraints(
            make_table(db, table), TableConstraints(foreign_keys=[key])
        )


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_foreign_keys_follow_a_renamed_and_a_dropped_parent_on_source_and_replica(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    _seed(source)
    bootstrap(engine)
    start = source.get_current_notification_event_id()
    customers = source.catalog.get_table("sales", "customers")
    source.catalog.alter_table("sales", "customers", customers.model_copy(update={"table_name": "clients"}))
    assert _keys(source, "sales", "orders") == [("orders_fk", None, "clients")]
    assert _keys(source, "crm", "visits") == [("visits_fk", "sales", "clients")]
    assert _keys(source, "sales", "clients") == [("referral_fk", None, "clients")]  # its key to itself
    first, *children = events_of(source, start)
    assert first == ("ALTER_TABLE", "sales", "customers")
    assert sorted(children) == [
        ("ALTER_TABLE", "crm", "visits"),
        ("ALTER_TABLE", "sales", "orders"),
        ("ALTER_TABLE", "sales", "returns"),
    ]
    incremental(engine)
    assert _keys(target, "sales_dr", "orders") == [("orders_fk", None, "clients")]
    assert verify(source, "sales", target, "sales_dr") == []

    clients = source.catalog.get_table("sales", "clients")  # moved to another database: keys name it there
    source.catalog.alter_table("sales", "clients", clients.model_copy(update={"db_name": "crm"}))
    assert _keys(source, "sales", "orders") == [("orders_fk", "crm", "clients")]
    assert _keys(source, "crm", "visits") == [("visits_fk", None, "clients")]
    source.catalog.alter_table("crm", "clients", clients.model_copy(update={"db_name": "sales"}))

    source.catalog.drop_table("sales", "clients")
    assert _keys(source, "sales", "orders") == [] and _keys(source, "sales", "returns") == []
    assert _keys(source, "crm", "visits") == []
    incremental(engine)
    assert _keys(target, "sales_dr", "orders") == []
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_table_named_like_the_parent_keeps_its_keys(source: Metastore) -> None:
    """Only keys whose parent is the renamed table follow: a same-named table of another database, or a
    name the LIKE pre-filter matches with '_' as a wildcard, is not the parent."""
    _seed(source)
    source.catalog.create_database(Database(name="other"))
    source.catalog.create_table(make_table("other", "customers"))
    source.catalog.create_table(make_table("other", "customersx"))
    source.catalog.drop_table("other", "customers")
    assert _keys(source, "sales", "orders") == [("orders_fk", None, "customers")]
    assert _keys(source, "crm", "visits") == [("visits_fk", "sales", "customers")]


def test_a_protected_replicas_keys_are_left_to_its_replication(source: Metastore) -> None:
    """A replica in the same metastore whose key names a source table (another database): the source's
    drop is not refused for it, and the replica's key is not changed by a client's write."""
    _seed(source)
    with privileged("test: a replica as a load makes it"):
        source.catalog.create_database(Database(name="crm_dr", parameters={REPLICA_OF: "crm"}))
        key = ForeignKey(
            name="v_fk", columns=["id"], parent_db="sales", parent_table="customers", parent_columns=["id"]
        )
        source.catalog.constraints.create_table_with_constraints(
            make_table("crm_dr", "visits"), TableConstraints(foreign_keys=[key])
        )
    before = source.catalog.get_table("crm_dr", "visits").model_dump_json()
    source.catalog.drop_table("sales", "customers")
    assert _keys(source, "crm", "visits") == []
    assert source.catalog.get_table("crm_dr", "visits").model_dump_json() == before


def test_a_foreign_key_needs_a_primary_or_unique_key_in_its_parent(source: Metastore) -> None:
    """Hive's rule (``ObjectStore.addForeignKeys``), which also lets a drop of a table that never had a key
    skip looking for keys naming it."""
    _seed(source)
    source.catalog.create_table(make_table("sales", "plain"))
    key = ForeignKey(name="p_fk", columns=["id"], parent_table="plain", parent_columns=["id"])
    before = source.get_current_notification_event_id()
    with pytest.raises(InvalidObjectError, match=r"'sales\.plain' has no primary key or unique constraint"):
        source.catalog.constraints.create_table_with_constraints(
            make_table("sales", "child"), TableConstraints(foreign_keys=[key])
        )
    assert "child" not in source.catalog.get_tables("sales")
    assert source.get_current_notification_event_id() == before
