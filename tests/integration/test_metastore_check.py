"""``hmsrepl metastore check`` lists stored locations that break the ownership rule, and only those."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import update

from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.locations import location_key
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.overlaps import find_overlaps
from hmsrepl.metastore.schema import partitions, tbls
from tests.helpers import make_partition, make_table


def _plant(store: Metastore, table, column, where, location: str) -> None:  # type: ignore[no-untyped-def]
    """Write a location as an older version could have, past the catalog's checks."""
    with store.engine.begin() as conn:
        conn.execute(
            update(table).where(where).values(location=location, location_key=location_key(location))
        )


def _check(db_url: str) -> tuple[int, list[str]]:
    done = CliRunner().invoke(main, ["--db-url", db_url, "metastore", "check"])
    return done.exit_code, done.stdout.splitlines()


def test_hive_layout_passes_and_planted_nestings_are_each_named(metastore: Metastore, db_url: str) -> None:
    catalog = metastore.catalog
    catalog.create_database(Database(name="sales"))
    orders = catalog.create_table(make_table("sales", "orders", partition_keys=("d",)))
    a, b = catalog.add_partitions(
        "sales", "orders", [make_partition(orders, "a"), make_partition(orders, "b")]
    )
    clicks = catalog.create_table(make_table("sales", "clicks"))
    assert (
        list(find_overlaps(metastore)) == []
    )  # databases hold tables, tables their partitions: Hive's layout
    code, lines = _check(db_url)
    assert code == 0 and lines[-1].startswith("no stored location")

    inside_a = f"{a.sd.location}/nested"  # a sibling partition inside d=a: its drop would recycle d=a's files
    _plant(metastore, partitions, partitions.c.location, partitions.c.part_name == "d=b", inside_a)
    clicks_location = clicks.sd.location or ""
    _plant(metastore, tbls, tbls.c.location, tbls.c.tbl_name == "clicks", orders.sd.location or "")
    found = sorted(o.describe() for o in find_overlaps(metastore))
    assert found == sorted(
        [
            f"partition sales.orders/d=b ('{inside_a}') is inside partition sales.orders/d=a ('{a.sd.location}')",
            f"table sales.clicks ('{orders.sd.location}') is at table sales.orders ('{orders.sd.location}')",
            # clicks now sits where orders is, so orders' partitions lie inside another table too
            f"partition sales.orders/d=a ('{a.sd.location}') is inside table sales.clicks ('{orders.sd.location}')",
            f"partition sales.orders/d=b ('{inside_a}') is inside table sales.clicks ('{orders.sd.location}')",
        ]
    )
    code, lines = _check(db_url)
    assert code == 1 and sorted(lines) == found
    assert clicks_location and b.sd.location  # the planted rows replaced real, separate locations


def test_a_table_of_another_database_inside_a_database_directory_is_named(
    sqlite_metastore: Metastore,
) -> None:
    catalog = sqlite_metastore.catalog
    catalog.create_database(Database(name="a"))
    catalog.create_database(Database(name="b"))
    catalog.create_table(make_table("b", "t"))
    inside = f"{catalog.get_database('a').location_uri}/t"
    _plant(sqlite_metastore, tbls, tbls.c.location, tbls.c.tbl_name == "t", inside)
    [overlap] = find_overlaps(sqlite_metastore)
    assert (overlap.outer.kind, overlap.outer.name, overlap.inner.name) == ("database", "a", "b.t")


def test_check_reads_a_large_catalog_in_one_pass(sqlite_metastore: Metastore, tmp_path: Path) -> None:
    catalog = sqlite_metastore.catalog
    catalog.create_database(Database(name="big"))
    for n in range(5):
        table = catalog.create_table(make_table("big", f"t{n}", partition_keys=("p",)))
        catalog.add_partitions("big", f"t{n}", [make_partition(table, str(i)) for i in range(200)])
    assert list(find_overlaps(sqlite_metastore)) == []
