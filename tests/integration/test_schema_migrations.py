"""Alembic migrations: an existing metastore upgrades in place, and the migrated schema is the model's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import insert, inspect, text

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import (
    SCHEMA_HEAD,
    alembic_config,
    make_engine,
    recorded_revision,
    schema_is_current,
    upgrade_schema,
)
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.new_schema import create_if_empty
from hmsrepl.metastore.schema import dbs, metadata, tbls
from tests.backends import temporary_database
from tests.helpers import make_table


@pytest.fixture
def db_url(empty_db_url: str) -> str:
    """Migrations start from a database without any table (on PostgreSQL the suite's databases otherwise
    hold the current schema already)."""
    return empty_db_url


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


def migrate(db_url: str) -> None:
    """Every migration from the first, as a metastore created before the newest revision went through them
    (``upgrade_schema`` creates an empty database's schema in one step instead)."""
    command.upgrade(alembic_config(db_url), "head")


def test_migrated_schema_equals_the_model(db_url: str) -> None:
    migrate(db_url)
    engine = make_engine(db_url)
    with engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), metadata)
    assert differences == []


def described(db_url: str) -> dict[str, Any]:
    """A database's schema and rows as its server reports them: per table its columns (type, nullability,
    default), key, indexes, unique and foreign keys, checks, SQLite's AUTOINCREMENT, and its rows."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            found = inspect(conn)
            tables: dict[str, Any] = {}
            for name in sorted(found.get_table_names()):
                columns = {
                    c["name"]: (str(c["type"]), c["nullable"], str(c.get("default")), c.get("autoincrement"))
                    for c in found.get_columns(name)
                }
                tables[name] = {
                    "columns": columns,
                    "key": found.get_pk_constraint(name),
                    "indexes": sorted(
                        (i["name"], tuple(i["column_names"]), i["unique"]) for i in found.get_indexes(name)
                    ),
                    "unique": sorted(
                        (u["name"], tuple(u["column_names"])) for u in found.get_unique_constraints(name)
                    ),
                    "foreign": sorted(repr(sorted(f.items())) for f in found.get_foreign_keys(name)),
                    "checks": sorted(repr(sorted(c.items())) for c in found.get_check_constraints(name)),
                    "rows": sorted(map(repr, conn.execute(text(f"SELECT * FROM {name}")).mappings())),
                }
                if conn.dialect.name == "sqlite":
                    ddl = conn.execute(
                        text("SELECT sql FROM sqlite_master WHERE name = :n"), {"n": name}
                    ).scalar()
                    tables[name]["autoincrement"] = "AUTOINCREMENT" in str(ddl)
            return tables
    finally:
        engine.dispose()


def test_a_new_database_gets_the_schema_its_migrations_would_give(backend: str, tmp_path: Path) -> None:
    """The one-step schema of an empty database is the one every migration from the first builds: same
    tables, columns, keys, indexes, checks and seeded rows, the same revision recorded."""
    with (
        temporary_database(backend, str(tmp_path), empty=True) as migrated,
        temporary_database(backend, str(tmp_path), empty=True) as new,
    ):
        migrate(migrated)
        upgrade_schema(new)
        assert recorded_revision(new) == SCHEMA_HEAD
        expected, got = described(migrated), described(new)
        assert got.keys() == expected.keys()
        for name in expected:
            assert got[name] == expected[name], name
        assert got["notification_sequence"]["rows"] and got["alembic_version"]["rows"]


def test_a_database_holding_another_table_is_migrated_not_created(db_url: str) -> None:
    """A database that is not empty (an application's own table) is left to the migrations, which add the
    metastore's tables beside it; the one-step creation never runs over existing tables."""
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE other_app (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    assert not create_if_empty(db_url)
    upgrade_schema(db_url)
    assert recorded_revision(db_url) == SCHEMA_HEAD
    assert "other_app" in described(db_url)
