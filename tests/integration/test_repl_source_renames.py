"""A table is not renamed into or out of a database marked as a source of replication, as in Hive.

Hive's ``isRenameAllowed`` refuses a rename across databases when either one has ``repl.source.for`` set
(its REPL would lose the table), answering a MetaException ("Alter table not allowed for table ..."). The
refused rename changes nothing: the table, its files and the notification log stay as they were. Without
the marker the same rename goes through.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as h2

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.repl_source import SOURCE_OF_REPLICATION, RenameAcrossReplicationSourceError
from tests.backends import temporary_database
from tests.helpers import make_table, open_replica, write_file
from tests.integration.test_thrift_server import _sd
from tests.security.untouched import Untouched
from tests.servers import Hive2Client, metastore_server

REFUSAL = "Alter table not allowed for table hive.{}to new table = hive.{}"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    """Databases ``marked`` (a source of replication, policies p1 and p2) and ``plain``, one table each."""
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    with temporary_database(request.param, str(tmp_path)) as url:
        store = open_replica(url, tmp_path)
        try:
            c = store.catalog
            c.create_database(Database(name="marked", parameters={SOURCE_OF_REPLICATION: "p1,p2"}))
            c.create_database(Database(name="plain"))
            for db in ("marked", "plain"):
                table = c.create_table(make_table(db, "t"))
                write_file(table.sd.location or "", "000000_0", f"{db} rows".encode())
                c.insert(db, "t")
            yield store
        finally:
            store.close()


def _renamed(store: Metastore, db: str, new_db: str, new_name: str) -> None:
    table = store.catalog.get_table(db, "t")
    store.catalog.alter_table(db, "t", table.model_copy(update={"db_name": new_db, "table_name": new_name}))


def test_a_rename_into_or_out_of_a_source_of_replication_is_refused_and_changes_nothing(
    store: Metastore,
) -> None:
    guarded: list[Path | str] = [store.config.warehouse, store.config.cmroot]
    before = Untouched.take(guarded, [store])
    for db, new_db in (("marked", "plain"), ("plain", "marked")):
        expected = REFUSAL.format(f"{db}.t", f"{new_db}.t2")
        with pytest.raises(RenameAcrossReplicationSourceError, match=expected.replace(".", r"\.")) as info:
            _renamed(store, db, new_db, "t2")
        assert "database 'marked' is a source of replication (repl.source.for=p1,p2)" in str(info.value)
        before.assert_same(guarded, [store])
    _renamed(store, "marked", "marked", "t2")  # within one database: allowed
    assert store.catalog.get_tables("marked") == ["t2"]


def test_without_the_marker_the_rename_across_databases_goes_through(store: Metastore) -> None:
    marked = store.catalog.get_database("marked")
    store.catalog.alter_database("marked", marked.model_copy(update={"parameters": {}}))
    _renamed(store, "marked", "plain", "t2")
    assert store.catalog.get_tables("plain") == ["t", "t2"] and store.catalog.get_tables("marked") == []


def test_over_thrift_the_refusal_is_hive_s_meta_exception(tmp_path: Path) -> None:
    """A Hive client renaming across a marked database gets Hive's MetaException, and nothing moves."""
    root = tmp_path / "server"
    root.mkdir()
    with metastore_server(root, f"sqlite:///{tmp_path / 'hms.db'}") as server:
        client = Hive2Client(server.port, user="hive")
        try:
            client.create_database(
                h2.Database(
                    name="marked", description="", locationUri=None, parameters={SOURCE_OF_REPLICATION: "p1"}
                )
            )
            client.create_database(h2.Database(name="plain", description="", locationUri=None, parameters={}))
            client.create_table(
                h2.Table(
                    tableName="t",
                    dbName="plain",
                    owner="hive",
                    sd=_sd(),
                    partitionKeys=[],
                    parameters={},
                    tableType="MANAGED_TABLE",
                )
            )
            last = client.get_current_notificationEventId().eventId
            table = client.get_table("plain", "t")
            location = table.sd.location
            table.dbName = "marked"
            with pytest.raises(h2.MetaException) as info:
                client.alter_table("plain", "t", table)
            assert info.value.message.startswith(REFUSAL.format("plain.t", "marked.t"))
            assert client.get_table("plain", "t").sd.location == location
            assert client.get_all_tables("marked") == []
            assert client.get_current_notificationEventId().eventId == last  # no event logged
        finally:
            client.close()
