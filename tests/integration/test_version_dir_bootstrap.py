"""A bootstrap's version directories: a value spelling a version mark gets a directory of its own, and the
copier's staging areas at logical locations are found by one listing of their directory, not a check each.

The file behaviour does not depend on the catalog's backend: these run on SQLite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.messages import DataChange, ListingMismatchError
from hmsrepl.metastore.model import Database
from hmsrepl.replication import replica_versions
from hmsrepl.replication.apply_stats import ApplyStats
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import VERSION_MARK, versioned_location
from hmsrepl.replication.replica_versions import VersionPublisher
from hmsrepl.replication.verify import verify
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import local_path
from hmsrepl.storage.rooted import RootedFileSystem
from tests.backends import temporary_database
from tests.helpers import make_partition, make_table, open_replica, write_file
from tests.security.untouched import tree_hashes


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Metastore]:
    with temporary_database("sqlite", str(tmp_path)) as url:
        store = open_replica(url, tmp_path)
        yield store
        store.close()


def _table(source: Metastore, values: list[str], *, files: bool = True) -> None:
    c = source.catalog
    c.create_database(Database(name="d"))
    table = c.create_table(make_table("d", "t", partition_keys=("k",)))
    if not files:  # empty partitions: no copy is staged ahead at their logical locations
        c.add_partitions("d", "t", [make_partition(table, value) for value in values])
        return
    for value in values:
        _table_add(source, value)


def _load(engine: ReplicationEngine, dump_dir: str) -> None:
    engine.execute(f"REPL LOAD d_dr FROM '{dump_dir}'")


def test_a_value_spelling_a_version_mark_gets_a_directory_of_its_own(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    """``k=x.hmsrepl-vN`` names the version directory ``k=x`` gets at event N: the load gives it another,
    and changing it later leaves ``k=x``'s files as they were."""
    _table(source, ["x"])
    mark = f"x{VERSION_MARK}{source.events.current_event_id() + 2}"  # the bootstrap's event: two more
    _table_add(source, mark)
    dumped = engine.execute("REPL DUMP d")
    assert f"{VERSION_MARK}{dumped.last_event_id}" in mark
    _load(engine, dumped.dump_dir)
    x = target.catalog.get_partition("d_dr", "t", ["x"]).sd.location or ""
    other = target.catalog.get_partition("d_dr", "t", [mark]).sd.location or ""
    assert x.endswith(f"/k={mark}") and other != x and not other.startswith(x + "/")
    assert verify(source, "d", target, "d_dr") == []
    kept = tree_hashes(local_path(x))
    [part] = source.catalog.get_partitions_by_names("d", "t", [f"k={mark}"])
    new = write_file(part.sd.location or "", "000001_0", b"more rows")
    source.catalog.insert("d", "t", [mark], new_files=[new])
    _load(engine, engine.execute(f"REPL DUMP d FROM {dumped.last_event_id}").dump_dir)
    assert target.catalog.get_partition("d_dr", "t", ["x"]).sd.location == x
    assert tree_hashes(local_path(x)) == kept
    assert verify(source, "d", target, "d_dr") == []


def _table_add(source: Metastore, value: str) -> None:
    table = source.catalog.get_table("d", "t")
    [part] = source.catalog.add_partitions("d", "t", [make_partition(table, value)])
    write_file(part.sd.location or "", "000000_0", f"rows of {value}".encode())
    source.catalog.insert("d", "t", [value])


def test_staging_areas_are_found_by_one_listing_and_retired(
    engine: ReplicationEngine, source: Metastore, target: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leftovers at logical locations (an interrupted copier's) are retired after the load, those asked
    about after the directory's listing too, and the store is asked about the partitions' logical locations
    fewer than ``LIST_AFTER_ASKS`` times, then for each leftover only (200 partitions: one check each before).
    Empty partitions: a load staging copies ahead makes a staging area at each logical location itself."""
    values = [f"{n:03d}" for n in range(200)]
    _table(source, values, files=False)
    dumped = engine.execute("REPL DUMP d")
    logical = Path(target.config.warehouse) / "d_dr.db" / "t"
    leftovers = [logical / f"k={v}" / ".hmsrepl-staging-000000_0" for v in ("000", "100", "199")]
    for path in leftovers:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"an interrupted copier's")
    asked: list[str] = []
    exists = RootedFileSystem.exists

    def counted(self: RootedFileSystem, uri: str) -> bool:
        if uri.rstrip("/").rpartition("/")[0] == str(logical) and VERSION_MARK not in uri:
            asked.append(uri)
        return exists(self, uri)

    monkeypatch.setattr(RootedFileSystem, "exists", counted)
    _load(engine, dumped.dump_dir)
    # before the listing, one check each; after it, each leftover only (and once more by the retirer)
    assert len(asked) <= replica_versions.LIST_AFTER_ASKS - 1 + 2 * len(leftovers), len(asked)
    assert not any(path.parent.exists() for path in leftovers)
    assert verify(source, "d", target, "d_dr") == []


def test_a_new_objects_first_version_holds_exactly_its_listing(target: Metastore, tmp_path: Path) -> None:
    """An object with no version yet (every partition of a bootstrap) gets a new directory holding exactly
    its listing: an interrupted attempt's file there is removed, the listed file copied in, and what is
    published is its whole listing for the catalog to record (nothing kept, removed or added in place)."""
    source = str(tmp_path / "src" / "t" / "k=a")
    encoded = EncodedFileUri(
        write_file(source, "000000_0", b"rows of a"), checksum_bytes(b"rows of a")
    ).encode()
    publisher = VersionPublisher(target, source_cmroot=str(tmp_path / "src_cm"), stats=ApplyStats())
    publisher.version = 9
    logical = f"{target.config.warehouse}/d_dr.db/t/k=a"
    write_file(versioned_location(logical, 9), "left_0", b"an interrupted attempt's")
    published = publisher.publish_version(
        None, logical, DataChange((encoded,), (), complete=True), source, None, "partition 'd_dr.t/k=a'"
    )
    assert published.location == versioned_location(logical, 9)
    assert os.listdir(local_path(published.location)) == ["000000_0"]
    assert published.files == {"000000_0": encoded} and not published.as_delta
    assert not (published.replace or published.in_place or published.removed)
    assert [r.rel_path for r in published.records()] == ["000000_0"]  # stamped from the new version
    publisher.discard_batch()  # nothing names it: the failed batch removes it
    assert not os.path.exists(local_path(published.location))


def test_a_delta_onto_a_new_object_is_still_checked(target: Metastore, tmp_path: Path) -> None:
    """A delta on an object the replica does not hold yet says how many files follow it: one that cannot
    be is refused in one line naming the object, before any directory is made."""
    publisher = VersionPublisher(target, source_cmroot=str(tmp_path / "src_cm"), stats=ApplyStats())
    logical = f"{target.config.warehouse}/d_dr.db/t/k=b"
    with pytest.raises(ListingMismatchError) as failure:
        publisher.publish_version(
            None, logical, DataChange((), (), count=3), None, None, "partition 'd_dr.t/k=b'"
        )
    assert "d_dr.t/k=b" in str(failure.value) and "\n" not in str(failure.value)
    assert not os.path.exists(local_path(f"{target.config.warehouse}/d_dr.db/t"))
