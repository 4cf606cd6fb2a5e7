"""Alembic migrations: an existing metastore upgrades in place, and the migrated schema is the model's."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import make_engine, schema_is_current, upgrade_schema
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.schema import dbs, metadata, tbls
from tests.helpers import make_table


def _store_old_table(db_url: str, location: str | None) -> int:
    """Database ``kept`` and table ``kept.t`` as an older revision's metastore wrote them (only the columns it
    had: today's catalog also writes columns and tables added since); returns the table's id."""
    engine = make_engine(db_url)
    table = make_table("kept", "t")
    with engine.begin() as conn:
        db_id = conn.execute(
            insert(dbs).values(name="kept", doc=Database(name="kept").model_dump_json(), create_time=0)
        ).inserted_primary_key[0]
        tbl_id = conn.execute(
            insert(tbls).values(
                db_id=db_id,
                tbl_name="t",
                tbl_type=str(table.table_type),
                location=location,
                doc=table.model_dump_json(exclude={"id", "write_id"}),
                write_id=0,
            )
        ).inserted_primary_key[0]
    engine.dispose()
    return int(tbl_id)


def test_upgrade_keeps_data_and_ids_are_never_reused(db_url: str, tmp_path: Path) -> None:
    upgrade_schema(db_url, "0001")
    config = MetastoreConfig(db_url=db_url, warehouse=str(tmp_path / "wh"), cmroot=str(tmp_path / "cm"))
    first_id = _store_old_table(db_url, None)
    assert not schema_is_current(make_engine(db_url))
    upgrade_schema(db_url)
    store = Metastore(config)
    assert schema_is_current(store.engine)
    assert store.catalog.get_table("kept", "t").id == first_id
    store.catalog.drop_table("kept", "t")
    again = store.catalog.create_table(make_table("kept", "t"))
    assert again.id != first_id  # a re-created table is told apart by its id
    store.close()


def test_locations_stored_before_their_keys_still_guard_their_directories(
    db_url: str, tmp_path: Path
) -> None:
    """Tables stored before location keys existed get theirs on upgrade: a new table inside one of their
    directories, or holding one, is refused as it would be for a table created today."""
    upgrade_schema(db_url, "0007")
    config = MetastoreConfig(db_url=db_url, warehouse=str(tmp_path / "wh"), cmroot=str(tmp_path / "cm"))
    kept = tmp_path / "wh" / "kept.db" / "t"
    _store_old_table(db_url, f"file://{kept}/")  # another spelling of the same directory
    upgrade_schema(db_url)
    store = Metastore(config)
    try:
        store.catalog.create_database(Database(name="other"))
        for location, relation in ((kept / "inner", "lies inside"), (kept.parent, "holds"), (kept, "is")):
            table = make_table("other", "x")
            table = table.model_copy(update={"sd": table.sd.model_copy(update={"location": str(location)})})
            with pytest.raises(InvalidObjectError, match=f"{relation} the location of table 'kept.t'"):
                store.catalog.create_table(table)
    finally:
        store.close()


def test_migrated_schema_equals_the_model(db_url: str) -> None:
    upgrade_schema(db_url)
    engine = make_engine(db_url)
    with engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), metadata)
    assert differences == []
