"""Hive 4's partition projection and PartitionSpec grouping (``thrift.partition_specs``), and the name order of
``get_partition_names_req``, on the structs alone: the cases a small table over the wire does not reach."""

from __future__ import annotations

import pytest

from hmsrepl.exceptions import MetastoreError
from hmsrepl.thrift.api.partition_specs import _order_specs, _ordered
from hmsrepl.thrift.idl import hms
from hmsrepl.thrift.partition_specs import Projection, group_by_storage

TABLE_PATH = "file:/wh/db.db/t"


def _table() -> object:
    return hms.Table(
        dbName="db", tableName="t", catName="hive", sd=hms.StorageDescriptor(location=TABLE_PATH)
    )


def _part(values: list[str], location: str | None, *, buckets: int = -1, fmt: str = "text", skewed=None):
    sd = hms.StorageDescriptor(
        cols=[hms.FieldSchema(name="id", type="bigint")],
        location=location,
        inputFormat=fmt,
        outputFormat=fmt,
        numBuckets=buckets,
        serdeInfo=hms.SerDeInfo(serializationLib="lazy", parameters={"a": "1"}),
        skewedInfo=skewed,
    )
    return hms.Partition(
        values=values, dbName="db", tableName="t", sd=sd, parameters={"k": "v"}, createTime=7
    )


def test_a_projection_names_fields_by_path_or_prefix_and_refuses_others_with_hives_message() -> None:
    sd_fields = Projection.of(hms.GetProjectionsSpec(fieldList=["sd"])).fields
    assert sd_fields is not None and "sd.location" in sd_fields and "sd.serdeInfo.parameters" in sd_fields
    assert "values" not in sd_fields
    serde = Projection.of(hms.GetProjectionsSpec(fieldList=["sd.serdeInfo"])).fields
    assert serde is not None and all(f.startswith("sd.serdeInfo.") for f in serde)
    assert Projection.of(hms.GetProjectionsSpec(fieldList=[])).fields is None  # whole partitions
    with pytest.raises(MetastoreError, match=r"^Invalid field name sd\.nope$"):
        Projection.of(hms.GetProjectionsSpec(fieldList=["values", "sd.nope"]))


def test_a_projection_keeps_only_the_named_fields_and_the_matching_parameter_keys() -> None:
    part = _part(["1"], f"{TABLE_PATH}/p=1")
    part.parameters = {"a_b": "1", "ab": "2", "c%": "3"}
    spec = hms.GetProjectionsSpec(
        fieldList=["sd.cols.name", "parameters"], includeParamKeyPattern="a\\_%", excludeParamKeyPattern=None
    )
    out = Projection.of(spec).apply(part)
    assert out.parameters == {"a_b": "1"}  # the escaped underscore is literal
    assert [(c.name, c.type) for c in out.sd.cols] == [("id", None)]
    assert (out.sd.location, out.values, out.writeId, out.createTime) == (None, None, None, None)
    assert part.sd.cols[0].type == "bigint"  # the source is untouched
    everything_but = Projection.of(hms.GetProjectionsSpec(fieldList=None, excludeParamKeyPattern="%\\%"))
    assert everything_but.apply(part).parameters == {"a_b": "1", "ab": "2"}


def test_partitions_group_by_shared_descriptor_under_the_table_and_the_rest_are_sent_whole() -> None:
    skew = hms.SkewedInfo(skewedColNames=["id"], skewedColValues=[], skewedColValueLocationMaps={})
    parts = [
        _part(["1"], f"{TABLE_PATH}/p=1"),
        _part(["2"], f"{TABLE_PATH}/p=2", fmt="orc"),  # another format: a second shared spec
        _part(["3"], f"{TABLE_PATH}/p=3"),
        _part(["4"], "file:/elsewhere/p=4"),  # outside the table's directory
        _part(["5"], f"{TABLE_PATH}/p=5", buckets=4),  # bucketed unlike the first
        _part(["6"], f"{TABLE_PATH}/p=6", skewed=skew),  # skewed: its own
    ]
    text, orc, listed = group_by_storage(_table(), parts)
    assert [(m.values, m.relativePath) for m in text.sharedSDPartitionSpec.partitions] == [
        (["1"], "/p=1"),
        (["3"], "/p=3"),
    ]
    assert text.rootPath == text.sharedSDPartitionSpec.sd.location == TABLE_PATH
    assert text.sharedSDPartitionSpec.sd.serdeInfo == parts[0].sd.serdeInfo
    assert [m.values for m in orc.sharedSDPartitionSpec.partitions] == [["2"]]
    assert [p.values for p in listed.partitionList.partitions] == [["4"], ["5"], ["6"]]
    assert (listed.dbName, listed.tableName, listed.catName, listed.sharedSDPartitionSpec) == (
        "db",
        "t",
        "hive",
        None,
    )
    assert group_by_storage(_table(), []) == []


def test_without_descriptor_or_location_the_partitions_share_one_spec_without_paths() -> None:
    bare = [hms.Partition(values=[v], parameters={}) for v in ("1", "2")]
    [spec] = group_by_storage(_table(), bare)
    assert spec.sharedSDPartitionSpec.sd == hms.StorageDescriptor() and spec.rootPath is None
    assert [m.relativePath for m in spec.sharedSDPartitionSpec.partitions] == [None, None]
    no_location = [_part([v], None) for v in ("1", "2")]
    [spec] = group_by_storage(_table(), no_location)
    assert spec.rootPath is None and [m.values for m in spec.sharedSDPartitionSpec.partitions] == [
        ["1"],
        ["2"],
    ]


def test_the_name_order_is_hives_order_spec() -> None:
    assert _order_specs(None) == _order_specs(" ") == _order_specs("0:+:-") == []
    assert _order_specs("1,0:-+") == [(1, False), (0, True)]
    with pytest.raises(MetastoreError, match="do not mismatch"):
        _order_specs("0,1:+")
    names = ["k=b/n=10", "k=a/n=9", "k=a/n=x", "k=a/n=D"]
    assert _ordered(names, [(1, True)], ["string", "int"], "D") == [
        "k=a/n=9",
        "k=b/n=10",
        "k=a/n=x",
        "k=a/n=D",
    ]
    assert _ordered(names, [(0, False), (1, False)], ["string", "int"], "D") == [
        "k=b/n=10",
        "k=a/n=D",
        "k=a/n=x",
        "k=a/n=9",
    ]
    with pytest.raises(MetastoreError, match="key position 2 of 2 keys"):
        _ordered(names, [(2, True)], ["string", "int"], "D")
