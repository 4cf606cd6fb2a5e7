"""Table constraints (Hive 3+): stored with their table, answered by the six reads, changed by the add/drop
calls, refused on bad input with nothing changed, and replicated by bootstrap and incremental loads.

The wire test's client is Apache Thrift's binding of Hive 4's IDL shipped in pyiceberg (``hive_metastore``),
whose constraint calls are the ones a Hive 3.1 client sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hive_metastore import ThriftHiveMetastore as Hive4
from hive_metastore import ttypes as h4
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from hmsrepl.cache import CacheSettings, MetadataCache
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import ReplicaProtectedError
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import capture_state, verify
from hmsrepl.thrift.handler import MetastoreHandler
from hmsrepl.thrift.idl import hms
from tests.helpers import make_table, open_store
from tests.integration.test_replication import bootstrap, incremental
from tests.servers import Hive2Client, metastore_server

DB = "shop"


def _sd(ns: Any, warehouse: str, name: str, cols: list[str]) -> Any:
    return ns.StorageDescriptor(
        cols=[ns.FieldSchema(c, "bigint", None) for c in cols],
        location=f"{warehouse}/{DB}.db/{name}",
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=ns.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


def _table(ns: Any, warehouse: str, db: str, name: str, cols: list[str]) -> Any:
    return ns.Table(
        tableName=name,
        dbName=db,
        owner="hive",
        sd=_sd(ns, warehouse, name, cols),
        partitionKeys=[],
        parameters={},
        tableType="MANAGED_TABLE",
    )


def _create_pair(ns: Any, client: Any, warehouse: str, db: str) -> None:
    """``customers`` (primary key id) and ``orders`` with every kind of constraint, in one call each."""
    pk = [ns.SQLPrimaryKey(db, "customers", "id", 1, "customers_pk", True, False, True)]
    client.create_table_with_constraints(
        _table(ns, warehouse, db, "customers", ["id", "region"]), pk, [], [], [], [], []
    )
    client.create_table_with_constraints(
        _table(ns, warehouse, db, "orders", ["order_id", "line", "customer", "qty"]),
        [
            ns.SQLPrimaryKey(db, "orders", "line", 2, "orders_pk", False, False, True),
            ns.SQLPrimaryKey(db, "orders", "order_id", 1, "orders_pk", False, False, True),
        ],
        [
            ns.SQLForeignKey(
                db,
                "customers",
                "id",
                db,
                "orders",
                "customer",
                1,
                0,
                0,
                "orders_fk",
                "customers_pk",
                False,
                False,
                True,
            )
        ],
        [ns.SQLUniqueConstraint("hive", db, "orders", "order_id", 1, "orders_uk", False, False, False)],
        [ns.SQLNotNullConstraint("hive", db, "orders", "qty", "orders_nn", True, False, False)],
        [ns.SQLDefaultConstraint("hive", db, "orders", "qty", "1", "orders_dc", True, False, False)],
        [ns.SQLCheckConstraint("hive", db, "orders", "qty", "qty > 0", "orders_cc", True, False, False)],
    )


def _answers(ns: Any, client: Any, db: str) -> dict[str, list[tuple[Any, ...]]]:
    """The six reads of ``orders`` (and foreign keys by parent), each row as a tuple of its fields."""

    def rows(structs: list[Any]) -> list[tuple[Any, ...]]:
        return [tuple(vars(s).values()) for s in structs]

    return {
        "pk": rows(client.get_primary_keys(ns.PrimaryKeysRequest(db, "orders")).primaryKeys),
        "fk": rows(client.get_foreign_keys(ns.ForeignKeysRequest(None, None, db, "orders")).foreignKeys),
        "fk_by_parent": rows(
            client.get_foreign_keys(ns.ForeignKeysRequest(db, "customers", None, None)).foreignKeys
        ),
        "uk": rows(
            client.get_unique_constraints(ns.UniqueConstraintsRequest("hive", db, "orders")).uniqueConstraints
        ),
        "nn": rows(
            client.get_not_null_constraints(
                ns.NotNullConstraintsRequest("hive", db, "orders")
            ).notNullConstraints
        ),
        "dc": rows(
            client.get_default_constraints(
                ns.DefaultConstraintsRequest("hive", db, "orders")
            ).defaultConstraints
        ),
        "cc": rows(
            client.get_check_constraints(ns.CheckConstraintsRequest("hive", db, "orders")).checkConstraints
        ),
    }


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Any, Metastore, int]]:
    with metastore_server(tmp_path, f"sqlite:///{tmp_path / 'hms.db'}") as server:
        transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", server.port))
        client = Hive4.Client(TBinaryProtocol.TBinaryProtocol(transport))
        transport.open()
        client.set_ugi("hive", [])
        store = Metastore(server.config)
        try:
            client.create_database(
                h4.Database(name=DB, description="", locationUri=f"{server.warehouse}/{DB}.db")
            )
            yield server.warehouse, client, store, server.port
        finally:
            transport.close()
            store.close()


def test_constraints_round_trip_over_thrift(served) -> None:
    warehouse, client, store, _ = served
    _create_pair(h4, client, warehouse, DB)
    got = _answers(h4, client, DB)
    pk = client.get_primary_keys(h4.PrimaryKeysRequest(DB, "orders")).primaryKeys
    assert [(k.column_name, k.key_seq, k.pk_name, k.rely_cstr) for k in pk] == [
        ("order_id", 1, "orders_pk", True),
        ("line", 2, "orders_pk", True),
    ]
    [fk] = client.get_foreign_keys(h4.ForeignKeysRequest(None, None, DB, "orders")).foreignKeys
    assert (fk.pktable_db, fk.pktable_name, fk.pkcolumn_name, fk.fkcolumn_name, fk.fk_name, fk.pk_name) == (
        DB,
        "customers",
        "id",
        "customer",
        "orders_fk",
        "customers_pk",
    )
    assert got["fk_by_parent"] == got["fk"]
    [dc] = client.get_default_constraints(
        h4.DefaultConstraintsRequest("hive", DB, "orders")
    ).defaultConstraints
    assert (dc.column_name, dc.default_value, dc.dc_name) == ("qty", "1", "orders_dc")
    [cc] = client.get_check_constraints(h4.CheckConstraintsRequest("hive", DB, "orders")).checkConstraints
    assert (cc.column_name, cc.check_expression) == ("qty", "qty > 0")
    assert [len(got[k]) for k in ("uk", "nn")] == [1, 1]
    every = client.get_all_table_constraints(
        h4.AllTableConstraintsRequest(DB, "orders", "hive")
    ).allTableConstraints
    assert [every.primaryKeys, every.foreignKeys, every.checkConstraints] == [pk, [fk], [cc]]

    # A client's alter sends no constraints: they stay.
    orders = client.get_table(DB, "orders")
    orders.parameters = {**orders.parameters, "comment": "altered"}
    client.alter_table(DB, "orders", orders)
    assert _answers(h4, client, DB) == got

    # add_* and drop_constraint: each one ALTER_TABLE event.
    before = store.get_current_notification_event_id()
    client.add_unique_constraint(
        h4.AddUniqueConstraintRequest(
            [h4.SQLUniqueConstraint("hive", DB, "customers", "region", 1, "cust_uk")]
        )
    )
    client.drop_constraint(h4.DropConstraintRequest(DB, "orders", "orders_cc"))
    events = store.get_next_notification(before, 10)
    assert [e.event_type for e in events] == ["ALTER_TABLE", "ALTER_TABLE"]
    assert (
        client.get_check_constraints(h4.CheckConstraintsRequest("hive", DB, "orders")).checkConstraints == []
    )
    [uk] = client.get_unique_constraints(
        h4.UniqueConstraintsRequest("hive", DB, "customers")
    ).uniqueConstraints
    assert (uk.table_name, uk.column_name, uk.uk_name) == ("customers", "region", "cust_uk")


def test_bad_constraints_are_refused_and_change_nothing(served) -> None:
    warehouse, client, store, _ = served
    _create_pair(h4, client, warehouse, DB)
    before = (store.get_current_notification_event_id(), _answers(h4, client, DB))
    # add_* declare only NoSuchObjectException and MetaException: Hive's InvalidObjectException arrives as the
    # latter, with the same message.
    with pytest.raises(h4.MetaException, match=r"column 'nosuch' is not a column of table 'shop\.orders'"):
        client.add_not_null_constraint(
            h4.AddNotNullConstraintRequest([h4.SQLNotNullConstraint("hive", DB, "orders", "nosuch", "x_nn")])
        )
    with pytest.raises(h4.MetaException, match="'orders_nn' already exists in database 'shop'"):
        client.add_not_null_constraint(
            h4.AddNotNullConstraintRequest(
                [h4.SQLNotNullConstraint("hive", DB, "customers", "region", "orders_nn")]
            )
        )
    with pytest.raises(h4.MetaException, match="already has primary key 'orders_pk'"):
        client.add_primary_key(
            h4.AddPrimaryKeyRequest([h4.SQLPrimaryKey(DB, "orders", "qty", 1, "other_pk")])
        )
    with pytest.raises(
        h4.NoSuchObjectException, match=r"'nosuch_cc' does not exist for table 'shop\.orders'"
    ):
        client.drop_constraint(h4.DropConstraintRequest(DB, "orders", "nosuch_cc"))
    with pytest.raises(h4.NoSuchObjectException, match="nosuch"):
        client.add_check_constraint(
            h4.AddCheckConstraintRequest(
                [h4.SQLCheckConstraint("hive", DB, "nosuch", "qty", "qty > 0", "n_cc")]
            )
        )
    bad_fk = h4.SQLForeignKey(DB, "customers", "nosuch", DB, "lines", "id", 1, 0, 0, "lines_fk", None)
    with pytest.raises(h4.InvalidObjectException, match="parent column 'nosuch'"):
        client.create_table_with_constraints(
            _table(h4, warehouse, DB, "lines", ["id"]), [], [bad_fk], [], [], [], []
        )
    assert (store.get_current_notification_event_id(), _answers(h4, client, DB)) == before
    assert "lines" not in client.get_all_tables(DB)


def _handler_answers(handler: MetastoreHandler, db: str) -> dict[str, list[tuple[Any, ...]]]:
    return _answers(hms, handler, db)


def _renamed(
    answers: dict[str, list[tuple[Any, ...]]], old: str, new: str
) -> dict[str, list[tuple[Any, ...]]]:
    return {k: [tuple(new if v == old else v for v in row) for row in rows] for k, rows in answers.items()}


def test_constraints_replicate_with_their_tables(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    source.catalog.create_database(Database(name="sales"))
    src, dst = MetastoreHandler(source), MetastoreHandler(target)
    _create_pair(hms, src, source.config.warehouse, "sales")
    source.catalog.create_table(make_table("sales", "plain"))
    bootstrap(engine)
    assert _handler_answers(dst, "sales_dr") == _renamed(_handler_answers(src, "sales"), "sales", "sales_dr")
    assert verify(source, "sales", target, "sales_dr") == []

    src.drop_constraint(hms.DropConstraintRequest("sales", "orders", "orders_fk"))
    src.add_not_null_constraint(
        hms.AddNotNullConstraintRequest(
            [hms.SQLNotNullConstraint("hive", "sales", "orders", "line", "line_nn")]
        )
    )
    src.create_table_with_constraints(
        _table(hms, source.config.warehouse, "sales", "later", ["id"]),
        [hms.SQLPrimaryKey("sales", "later", "id", 1, "later_pk", False, False, True)],
        [],
        [],
        [],
        [],
        [],
    )
    incremental(engine)
    assert _handler_answers(dst, "sales_dr") == _renamed(_handler_answers(src, "sales"), "sales", "sales_dr")
    [pk] = dst.get_primary_keys(hms.PrimaryKeysRequest("sales_dr", "later")).primaryKeys
    assert (pk.table_db, pk.pk_name) == ("sales_dr", "later_pk")
    assert verify(source, "sales", target, "sales_dr") == []

    # The protected replica refuses a client's constraint changes, and nothing changes.
    state = capture_state(target, "sales_dr")
    with pytest.raises(ReplicaProtectedError):
        dst.add_not_null_constraint(
            hms.AddNotNullConstraintRequest(
                [hms.SQLNotNullConstraint("hive", "sales_dr", "orders", "qty", "q_nn")]
            )
        )
    with pytest.raises(ReplicaProtectedError):
        dst.drop_constraint(hms.DropConstraintRequest("sales_dr", "orders", "orders_pk"))
    assert capture_state(target, "sales_dr") == state


def test_constraint_reads_through_the_metadata_cache_follow_each_change(tmp_path: Path) -> None:
    """With the cache on, a client reads its own constraint changes (the cache applies the table's events)."""
    store = open_store(tmp_path, "cached")
    cache = MetadataCache(store, CacheSettings(refresh_interval_seconds=0.01))
    cache.start()
    try:
        assert cache.updater.ready.wait(30)
        handler = MetastoreHandler(store, cache)
        store.catalog.create_database(Database(name=DB))
        _create_pair(hms, handler, store.config.warehouse, DB)
        assert len(_answers(hms, handler, DB)["pk"]) == 2
        handler.drop_constraint(hms.DropConstraintRequest(DB, "orders", "orders_pk"))
        assert _answers(hms, handler, DB)["pk"] == []
        handler.add_primary_key(
            hms.AddPrimaryKeyRequest([hms.SQLPrimaryKey(DB, "orders", "qty", 1, "qty_pk")])
        )
        [pk] = handler.get_primary_keys(hms.PrimaryKeysRequest(DB, "orders")).primaryKeys
        assert (pk.column_name, pk.pk_name) == ("qty", "qty_pk")
    finally:
        cache.stop()
        store.close()


def test_a_hive_2_3_client_creates_a_table_with_keys(served) -> None:
    """Hive 2.3's call has the table, primary and foreign keys only; the reads answer them."""
    from hmsclient.genthrift.hive_metastore import ttypes as h2

    warehouse, client, _, port = served
    old = Hive2Client(port, user="hive")
    try:
        pk = [h2.SQLPrimaryKey(DB, "legacy", "id", 1, "legacy_pk", False, False, True)]
        old.client.create_table_with_constraints(_table(h2, warehouse, DB, "legacy", ["id"]), pk, [])
    finally:
        old.close()
    [got] = client.get_primary_keys(h4.PrimaryKeysRequest(DB, "legacy")).primaryKeys
    assert (got.column_name, got.pk_name, got.rely_cstr) == ("id", "legacy_pk", True)
