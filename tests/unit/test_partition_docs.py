"""Partition structs built straight from stored documents equal the ones built through the model.

The Thrift read path skips the pydantic model for speed (``convert.PartitionDocs``); whatever a stored
document holds, the struct it answers must be the one ``partition_to_thrift`` gives for the model.
"""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.metastore.catalog.rows import _partition_from_row, _partition_snapshot, _snapshot
from hmsrepl.metastore.model import FieldSchema, Order, Partition, SerDeInfo, StorageDescriptor
from hmsrepl.thrift.convert import PartitionDocs, partition_to_thrift

# Text that looks like the decoder's markers or JSON structure must stay inside its string.
TRICKY = st.sampled_from(['],"location":', '"sd":{"cols":', '\\"', "}", "Ünï", ""])
TEXT = st.one_of(st.text(max_size=12), TRICKY)
PARAMS = st.dictionaries(TEXT, TEXT, max_size=3)
COLUMN = st.builds(
    FieldSchema, name=st.from_regex(r"[A-Za-z_]{1,8}", fullmatch=True), type=TEXT, comment=st.none() | TEXT
)
SD = st.builds(
    StorageDescriptor,
    cols=st.lists(COLUMN, max_size=4),
    location=st.none() | TEXT,
    input_format=st.none() | TEXT,
    output_format=st.none() | TEXT,
    compressed=st.booleans(),
    num_buckets=st.integers(-1, 64),
    serde_info=st.none()
    | st.builds(SerDeInfo, name=st.none() | TEXT, serialization_lib=st.none() | TEXT, parameters=PARAMS),
    bucket_cols=st.lists(TEXT, max_size=2),
    sort_cols=st.lists(st.builds(Order, col=TEXT, order=st.integers(0, 1)), max_size=2),
    parameters=PARAMS,
    stored_as_sub_directories=st.booleans(),
)
PARTITION = st.builds(
    Partition,
    values=st.lists(TEXT, min_size=1, max_size=3),
    db_name=st.from_regex(r"[a-z_]{1,6}", fullmatch=True),
    table_name=st.from_regex(r"[a-z_]{1,6}", fullmatch=True),
    create_time=st.integers(0, 2**31 - 1),
    last_access_time=st.integers(0, 2**31 - 1),
    sd=SD,
    parameters=PARAMS,
)


class Row:
    def __init__(self, doc: str, write_id: int) -> None:
        self.doc, self.write_id = doc, write_id


def through_model(doc: str, write_id: int):
    return partition_to_thrift(_partition_from_row(Row(doc, write_id)))


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(PARTITION, min_size=1, max_size=4), write_id=st.integers(0, 10**6))
def test_documents_as_stored_give_the_models_structs(parts: list[Partition], write_id: int) -> None:
    decode = PartitionDocs()  # one decoder for the whole reply, as the handler uses it
    for part in parts:
        doc = part.model_dump_json(exclude={"write_id"})  # as the catalog stores it
        assert decode(doc, write_id) == through_model(doc, write_id)


def test_documents_without_defaults_or_in_another_key_order() -> None:
    """Older or hand-written documents: missing fields take the model's defaults, any key order parses."""
    docs = [
        {"values": ["1"], "db_name": "Sales", "table_name": "Orders"},
        {
            "values": ["1"],
            "db_name": "s",
            "table_name": "o",
            "sd": {"location": "file:/x", "cols": [{"name": "ID", "type": "int"}]},
        },
        {
            "sd": {"cols": [{"type": "int", "name": "a"}], "serde_info": {}, "sort_cols": [{"col": "a"}]},
            "values": ["2"],
            "db_name": "s",
            "table_name": "o",
        },
    ]
    for doc in map(json.dumps, docs):
        assert PartitionDocs()(doc, 7) == through_model(doc, 7)


def test_partitions_of_one_reply_do_not_share_mutable_lists() -> None:
    part = Partition(
        values=["1"],
        db_name="s",
        table_name="o",
        sd=StorageDescriptor(cols=[FieldSchema(name="a", type="int")]),
    )
    decode = PartitionDocs()
    first, second = (decode(part.model_dump_json(), 0) for _ in range(2))
    first.sd.cols.append(None)
    first.parameters["k"] = "v"
    first.sd.serdeInfo.parameters["k"] = "v"
    assert second == through_model(part.model_dump_json(), 0)


@settings(max_examples=200, deadline=None)
@given(part=PARTITION, write_id=st.integers(0, 10**6))
def test_an_added_partitions_event_snapshot_from_its_stored_document_is_the_models(
    part: Partition, write_id: int
) -> None:
    """``add_partitions`` logs each partition decoded from the document it stores, not walked from the model
    again: the snapshot (and so the event's JSON) must be the model's, write id included."""
    part = part.model_copy(update={"write_id": write_id})
    from_doc = _partition_snapshot(part.model_dump_json(exclude={"write_id"}), write_id)
    assert from_doc == _snapshot(part)
    assert msgspec.json.encode(from_doc) == msgspec.json.encode(_snapshot(part))


def test_a_snapshot_from_a_document_keeps_fields_left_out_when_unset() -> None:
    """Hive 4's SerDe fields are left out of documents when unset, and kept when set."""
    serde = SerDeInfo(name="s", description="d", serde_type=1, serializer_class=None)
    part = Partition(
        values=["1"], db_name="s", table_name="o", sd=StorageDescriptor(serde_info=serde), write_id=3
    )
    assert _partition_snapshot(part.model_dump_json(exclude={"write_id"}), 3) == _snapshot(part)
