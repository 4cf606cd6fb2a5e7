"""OpenLineage for the replicate task: the source tables it read and the replica tables it wrote, named as
OpenLineage names Hive tables, through Airflow's own OpenLineage provider (its extractor picks the operator's
method) against real metastore servers."""

from __future__ import annotations

import uuid

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, FieldSchema, StorageDescriptor, Table
from tests.airflow.conftest import metastore_connection
from tests.servers import RunningMetastore

pytest.importorskip("airflow.providers.openlineage", reason="the OpenLineage provider is not installed")


def _table(db: str, name: str) -> Table:
    return Table(
        db_name=db,
        table_name=name,
        sd=StorageDescriptor(cols=[FieldSchema(name="id", type="int")]),
        table_type="MANAGED_TABLE",
    )


@pytest.fixture
def operator(
    monkeypatch: pytest.MonkeyPatch, session_metastore: RunningMetastore, target_metastore: RunningMetastore
) -> object:
    from hmsrepl_airflow.operators import ReplicateOperator

    monkeypatch.setenv("AIRFLOW_CONN_LINEAGE_SOURCE", metastore_connection(session_metastore.port))
    monkeypatch.setenv("AIRFLOW_CONN_LINEAGE_TARGET", metastore_connection(target_metastore.port))
    return ReplicateOperator(
        task_id="replicate",
        replication={"policy": "x", "target_db": "x_dr"},
        source_conn_id="lineage_source",
        target_conn_id="lineage_target",
    )


def test_an_incremental_run_reports_the_tables_of_its_window(
    operator: object,
    session_store: Metastore,
    session_metastore: RunningMetastore,
    target_metastore: RunningMetastore,
) -> None:
    from airflow.providers.openlineage.extractors.manager import ExtractorManager
    from hmsrepl_airflow.lineage import ReplicatedWindow

    db = f"lin_{uuid.uuid4().hex[:8]}"
    session_store.catalog.create_database(Database(name=db))
    session_store.catalog.create_table(_table(db, "before"))
    before = session_store.events.current_event_id()
    session_store.catalog.create_table(_table(db, "Orders"))
    session_store.catalog.create_table(_table(db, "clicks"))
    session_store.catalog.create_database(Database(name=f"{db}_other"))
    session_store.catalog.create_table(_table(f"{db}_other", "elsewhere"))
    after = session_store.events.current_event_id()
    session_store.catalog.create_table(_table(db, "later"))  # after the window: not this run's

    # Airflow's provider finds the operator's own lineage method (no extractor of ours to register).
    assert ExtractorManager().get_extractor_class(operator).__name__ == "DefaultExtractor"
    assert operator.get_openlineage_facets_on_complete(None).inputs == []  # nothing replicated yet

    operator._replicated = ReplicatedWindow(db, f"{db}_dr", before, after)
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [
        (f"hive://127.0.0.1:{session_metastore.port}", f"{db}.orders"),
        (f"hive://127.0.0.1:{session_metastore.port}", f"{db}.clicks"),
    ]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [
        (f"hive://127.0.0.1:{target_metastore.port}", f"{db}_dr.orders"),
        (f"hive://127.0.0.1:{target_metastore.port}", f"{db}_dr.clicks"),
    ]


def test_a_bootstrap_reports_the_replicas_tables(operator: object, target_store: Metastore) -> None:
    from hmsrepl_airflow.lineage import ReplicatedWindow

    db = f"lin_{uuid.uuid4().hex[:8]}_dr"
    target_store.catalog.create_database(Database(name=db, parameters={"repl.last.id": "7"}))
    for name in ("b", "a"):
        target_store.catalog.create_table(_table(db, name))
    operator._replicated = ReplicatedWindow("src", db, None, 7)
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert [d.name for d in lineage.inputs] == ["src.a", "src.b"]
    assert [d.name for d in lineage.outputs] == [f"{db}.a", f"{db}.b"]


def test_an_unreachable_metastore_costs_the_lineage_not_the_run(
    operator: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hmsrepl_airflow.lineage import ReplicatedWindow

    from tests.servers import free_port

    monkeypatch.setenv("AIRFLOW_CONN_LINEAGE_SOURCE", metastore_connection(free_port()))
    operator._replicated = ReplicatedWindow("src", "src_dr", 1, 5)
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert lineage.inputs == [] and lineage.outputs == []
