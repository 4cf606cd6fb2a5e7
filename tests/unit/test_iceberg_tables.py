"""Which paths an Iceberg table may name (``formats.iceberg_tables``), and what a load without copies names."""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.formats.iceberg_tables import metadata_refusal, path_below
from hmsrepl.metastore.model import StorageDescriptor, Table
from hmsrepl.replication.iceberg import IcebergReplicationError, localize

LOCATION = "file:/wh/ice.db/events"


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("file:/wh/ice.db/events/metadata/00001.metadata.json", "metadata/00001.metadata.json"),
        ("/wh/ice.db/events/metadata/00001.metadata.json", "metadata/00001.metadata.json"),
        ("file:///wh/ice.db/events/data/x.parquet", "data/x.parquet"),
        ("file:/wh/ice.db/events/../../../etc/conf.json", None),
        ("file:/wh/ice.db/events/metadata/./x.json", None),
        ("file:/wh/ice.db/events-other/metadata/x.json", None),
        ("file:/wh/ice.db/events", None),
        ("hdfs://nn/wh/ice.db/events/x", None),
    ],
)
def test_only_clean_paths_strictly_below_the_location_are_below_it(path: str, relative: str | None) -> None:
    assert path_below(path, LOCATION) == relative


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("hdfs://nn:8020/wh/t/metadata/1.json", "metadata/1.json"),
        ("HDFS://nn:8020/wh/t/metadata/1.json", "metadata/1.json"),
        ("hdfs://nn:8020/wh/t/../x/1.json", None),
        ("hdfs://other:8020/wh/t/metadata/1.json", None),
        ("hdfs://nn:8020/wh/t", None),
    ],
)
def test_other_file_systems_follow_the_same_rules(path: str, relative: str | None) -> None:
    assert path_below(path, "hdfs://nn:8020/wh/t/") == relative


def test_metadata_refusal_names_the_table_the_key_and_the_fix() -> None:
    params = {"table_type": "ICEBERG", "metadata_location": f"{LOCATION}/../../../elsewhere/conf.json"}
    reason = metadata_refusal("ice.events", params, LOCATION)
    assert (
        reason
        and "'ice.events'" in reason
        and "metadata_location" in reason
        and "<location>/metadata/" in reason
    )
    assert metadata_refusal("ice.events", {**params, "table_type": "HIVE"}, LOCATION) is None
    ok = {"table_type": "iceberg", "metadata_location": f"{LOCATION}/metadata/1.json"}
    assert metadata_refusal("ice.events", ok, LOCATION) is None
    assert metadata_refusal("ice.events", {**ok, "previous_metadata_location": "/tmp/x.json"}, LOCATION)


def _table(location: str, metadata: str) -> Table:
    return Table(
        db_name="ice_dr",
        table_name="events",
        sd=StorageDescriptor(location=location),
        parameters={"table_type": "ICEBERG", "metadata_location": metadata, "EXTERNAL": "TRUE"},
    )


def test_a_load_without_copies_names_where_the_copy_would_be(tmp_path: Path) -> None:
    """A metadata-only load: the replica's metadata_location stays below the replica's own location."""
    replica = tmp_path / "dst" / "events"
    replica.mkdir(parents=True)
    got = localize(_table(str(replica), f"{LOCATION}/metadata/00001.metadata.json"), LOCATION)
    assert got.parameters["metadata_location"] == f"{replica}/metadata/00001.metadata.json"


def test_a_load_refuses_metadata_outside_the_source_location_before_reading(tmp_path: Path) -> None:
    outside = tmp_path / "conf.json"
    outside.write_text("{}")
    escaping = f"{tmp_path}/src/events/../../conf.json"
    with pytest.raises(IcebergReplicationError, match="not below the table's location"):
        localize(_table(str(tmp_path / "dst" / "events"), escaping), str(tmp_path / "src" / "events"))
    assert not (tmp_path / "dst").exists()
