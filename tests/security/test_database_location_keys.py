"""Databases' locations looked up by their indexed keys: a location check reads only the databases around the
location checked, never every database's document, and still refuses every overlap it refused before (long
locations, whose stored key is cut, included; databases stored before the keys existed, once migrated)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, insert, select

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore, location_policy
from hmsrepl.metastore.database import make_engine, upgrade_schema
from hmsrepl.metastore.locations import LOCATION_KEY_CHARS, location_key
from hmsrepl.metastore.model import Database, Table
from hmsrepl.metastore.schema import dbs
from tests.backends import temporary_database
from tests.conftest import make_config
from tests.helpers import make_table

OTHERS = 300


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    with temporary_database(request.param, str(tmp_path)) as url:
        opened = Metastore.open(make_config(url, tmp_path))
        yield opened
        opened.close()


def _at(table: Table, location: Path | str) -> Table:
    return table.model_copy(update={"sd": table.sd.model_copy(update={"location": str(location)})})


class _Rows(list):  # type: ignore[type-arg]
    """A statement's rows, fetched at once, answering as a result does to the location checks."""

    def all(self) -> list[Any]:
        return self

    def first(self) -> Any:
        return self[0] if self else None


class _Recording:
    """A connection that records the names of the database rows every statement returns."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dialect = conn.dialect  # the checks choose their statements by backend
        self.database_rows: list[str] = []

    def execute(self, statement: Any, params: Any = None) -> _Rows:
        rows = _Rows(self.conn.execute(statement, params).all())
        self.database_rows += [row.name for row in rows if getattr(row, "kind", None) == "database"]
        return rows


def test_a_create_reads_only_the_databases_around_its_location(
    store: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = store.catalog
    catalog.create_database(Database(name="mine"))
    for number in range(OTHERS):
        catalog.create_database(Database(name=f"other_{number:03d}"))
    read: list[str] = []
    overlapping_rows = location_policy._overlapping_rows

    def recorded(rows: Any, loc: Any, skip_db: str | None) -> Any:
        read.extend(row.name for row in rows if row.kind == "database")
        return overlapping_rows(rows, loc, skip_db)

    monkeypatch.setattr(location_policy, "_overlapping_rows", recorded)
    catalog.create_table(make_table("mine", "first"))  # its database read on its own, then the check
    catalog.create_table(make_table("mine", "second"))  # the database read with the check
    # Its own database and the default one, at the warehouse above it: none of the 300 others.
    assert read and set(read) <= {"mine", "default"}
    assert catalog.get_table("mine", "second").sd.location

    # A batch of new tables (a replication load) reads around all their locations at once: the same.
    warehouse = Path(store.config.warehouse)
    batch = [(f"mine.t{n}", str(warehouse / "mine.db" / f"t{n}"), True) for n in range(3)]
    with store.engine.connect() as conn:
        recording = _Recording(conn)
        catalog.locations.check_tables(recording, batch)  # type: ignore[arg-type]
    assert set(recording.database_rows) <= {"mine", "default"}

    # And the refusals hold: a table at another database's directory, a database inside or around another's.
    other = warehouse / "other_150.db"
    with pytest.raises(InvalidObjectError, match="is the location of database 'other_150'"):
        catalog.create_table(_at(make_table("mine", "stolen"), other))
    with pytest.raises(InvalidObjectError, match="lies inside the location of database 'other_150'"):
        catalog.create_database(Database(name="nested", location_uri=str(other / "inner")))
    catalog.create_database(Database(name="zoned", location_uri=str(warehouse / "zone" / "zoned")))
    with pytest.raises(InvalidObjectError, match="holds the location of database 'zoned'"):
        catalog.create_database(Database(name="around", location_uri=str(warehouse / "zone")))
    managed = warehouse / "managed"
    catalog.create_database(Database(name="hive4", managed_location_uri=str(managed)))
    with pytest.raises(InvalidObjectError, match="lies inside the location of database 'hive4'"):
        catalog.create_database(Database(name="nested2", location_uri=str(managed / "inner")))


def test_long_locations_and_moved_databases_stay_guarded(metastore: Metastore) -> None:
    """A location longer than the stored key is still found, above and below; an altered location's key
    follows it: the new directory is guarded, the old one free."""
    catalog = metastore.catalog
    warehouse = Path(metastore.config.warehouse)
    long_dir = warehouse.joinpath(*(f"{letter * 200}" for letter in "abcd"))
    assert len(str(long_dir)) > LOCATION_KEY_CHARS
    catalog.create_database(Database(name="long", location_uri=str(long_dir)))
    catalog.create_database(Database(name="mine"))
    with pytest.raises(InvalidObjectError, match="is the location of database 'long'"):
        catalog.create_table(_at(make_table("mine", "t"), long_dir))
    with pytest.raises(InvalidObjectError, match="lies inside the location of database 'long'"):
        catalog.create_database(Database(name="inside", location_uri=str(long_dir / "x")))
    with pytest.raises(InvalidObjectError, match="holds the location of database 'long'"):
        catalog.create_database(Database(name="above", location_uri=str(long_dir.parent)))
    # Same first LOCATION_KEY_CHARS characters, another directory: the exact check lets it through.
    sibling = long_dir.parent / ("d" * 199 + "e")
    catalog.create_database(Database(name="sibling", location_uri=str(sibling)))

    old = warehouse / "mine.db"
    moved = warehouse / "moved"
    catalog.alter_database("mine", Database(name="mine", location_uri=str(moved)))
    catalog.create_database(Database(name="other"))
    with pytest.raises(InvalidObjectError, match="is the location of database 'mine'"):
        catalog.create_table(_at(make_table("other", "t"), moved))
    catalog.create_table(_at(make_table("other", "t"), old))
    catalog.drop_database("sibling")
    catalog.create_database(Database(name="again", location_uri=str(sibling)))


def test_databases_stored_before_their_keys_get_them_on_upgrade(empty_db_url: str, tmp_path: Path) -> None:
    db_url = empty_db_url
    upgrade_schema(db_url, "0014_versiondirs")
    kept = tmp_path / "warehouse" / "kept_here"
    managed = tmp_path / "warehouse" / "kept_managed"
    doc = Database(name="kept", location_uri=f"file://{kept}/", managed_location_uri=str(managed))
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(insert(dbs).values(name="kept", doc=doc.model_dump_json(), create_time=0))
    engine.dispose()
    upgrade_schema(db_url)
    store = Metastore.open(make_config(db_url, tmp_path))
    try:
        with store.engine.connect() as conn:
            row = conn.execute(
                select(dbs.c.location_key, dbs.c.managed_location_key).where(dbs.c.name == "kept")
            ).one()
        assert (row.location_key, row.managed_location_key) == (
            location_key(str(kept)),
            location_key(str(managed)),
        )
        store.catalog.create_database(Database(name="other"))
        with pytest.raises(InvalidObjectError, match="is the location of database 'kept'"):
            store.catalog.create_table(_at(make_table("other", "t"), kept))
        with pytest.raises(InvalidObjectError, match="lies inside the location of database 'kept'"):
            store.catalog.create_database(Database(name="inner", location_uri=str(managed / "x")))
    finally:
        store.close()


def test_a_batch_of_tables_cannot_take_another_databases_managed_tables(
    store: Metastore, tmp_path: Path
) -> None:
    """A replication load's batch (``create_tables``) naming a managed table whose directory holds another
    database's managed location (Hive 4's ``managedlocation``) is refused as a single create is: a drop of
    that table would delete the other database's managed tables. Their data, the catalog and the log stay
    as they were, wherever the hostile table stands in the batch."""
    from tests.security.untouched import Untouched

    catalog = store.catalog
    warehouse = Path(store.config.warehouse)
    catalog.create_database(Database(name="mine"))
    catalog.create_database(
        Database(
            name="victim",
            location_uri=str(warehouse / "victim.db"),
            managed_location_uri=str(warehouse / "m" / "victim.db"),
        )
    )
    owned = catalog.create_table(make_table("victim", "t"))
    data = Path(owned.sd.location or "") / "part-0.parquet"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_bytes(b"the victim's rows")
    before = Untouched.take([warehouse], [store])
    for position in (0, 3):
        batch = [make_table("mine", f"t{n}") for n in range(4)]
        batch[position] = _at(make_table("mine", "grab"), warehouse / "m")
        with pytest.raises(InvalidObjectError, match="database 'victim'"):
            catalog.create_tables(batch)
        before.assert_same([warehouse], [store])
