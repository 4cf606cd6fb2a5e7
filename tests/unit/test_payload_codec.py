"""The typed payloads and the log's wire format: documents round-trip unchanged, old messages read the same.

- Every payload type (each event type's body, with every snapshot, write and data change under it) goes
  through the codec the log uses (``encode_message`` / ``decode_message``, compressed or not) and the parse
  of its event type, and comes back equal; its document is the document that was stored.
- The log revision 7245dbf wrote (before payloads were typed) for a run touching every event type parses,
  and today's reader says of each message what that revision's said; the same calls today log the same
  documents (``tests/payload_history.py``).
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hmsrepl.metastore.event_specs import SPECS, parse, parse_event
from hmsrepl.metastore.events import EventType, NotificationEvent, decode_message, encode_message
from hmsrepl.metastore.payloads import Payload, PayloadFormatError, encode
from tests.payload_history import facts, run

PREVIOUS = Path(__file__).parent / "data" / "messages_7245dbf.json"

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_int = st.integers(-(2**63), 2**63 - 1)
_json_leaf = st.none() | st.booleans() | _int | st.floats(allow_nan=False, allow_infinity=False) | _text
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


def _of(info: mi.Type) -> st.SearchStrategy[Any]:
    """Values of one msgspec type, as the codec holds them (structs built from their fields)."""
    if isinstance(info, mi.StrType):
        return _text
    if isinstance(info, mi.BoolType):
        return st.booleans()
    if isinstance(info, mi.IntType):
        return _int
    if isinstance(info, mi.NoneType):
        return st.none()
    if isinstance(info, mi.AnyType):
        return _json
    if isinstance(info, mi.ListType):
        return st.lists(_of(info.item_type), max_size=3)
    if isinstance(info, mi.VarTupleType):
        return st.lists(_of(info.item_type), max_size=3).map(tuple)
    if isinstance(info, mi.DictType):
        return st.dictionaries(_of(info.key_type), _of(info.value_type), max_size=3)
    if isinstance(info, mi.UnionType):
        return st.one_of(*(_of(t) for t in info.types))
    if isinstance(info, mi.StructType | mi.DataclassType):
        return _built(info)
    raise AssertionError(f"no strategy for {info}")


def _built(info: mi.StructType | mi.DataclassType) -> st.SearchStrategy[Any]:
    """A struct with every required field and any subset of the others (left out: default or UNSET)."""
    required = {f.name: _of(f.type) for f in info.fields if f.required}
    optional = {f.name: _of(f.type) for f in info.fields if not f.required}
    return st.fixed_dictionaries(required, optional=optional).map(lambda kw: info.cls(**kw))


PAYLOAD_TYPES = sorted({spec.message.body_type for spec in SPECS.values()}, key=lambda t: t.__name__)
KIND_OF = {spec.message.body_type: kind for kind, spec in reversed(list(SPECS.items()))}


def test_every_event_type_has_a_payload_type_of_its_own_message_class() -> None:
    classes = [spec.message for spec in SPECS.values()]
    assert len(set(classes)) == len(EventType), "one message class per event type"
    for spec in SPECS.values():
        assert spec.message.body_type is not Payload, f"{spec.kind}: its message has no typed body"


@pytest.mark.parametrize("payload_type", PAYLOAD_TYPES, ids=lambda t: t.__name__)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), compress=st.booleans())
def test_every_payload_round_trips_through_the_codec_unchanged(
    payload_type: type[Payload], data: st.DataObject, compress: bool
) -> None:
    payload = data.draw(_built(mi.type_info(payload_type)))  # type: ignore[arg-type]
    kind = KIND_OF[payload_type]
    text, message_format = encode_message(
        payload, compress=compress, compress_min_bytes=0, exact_floats=SPECS[kind].floats
    )
    document = decode_message(text, message_format)
    message = parse(kind, document, "db", "t")
    assert message.body == payload
    logged = NotificationEvent(1, 0, str(kind), "db", "t", text, message_format)
    assert parse_event(logged) == message  # decoded from the stored text straight into the payload type
    assert _as_json(message.document()) == document  # read and written again: the stored document
    assert _as_json(encode(payload)) == document


def _as_json(document: dict[str, Any]) -> Any:
    """The document as JSON holds it (a data change's file lists are tuples in memory, arrays in JSON)."""
    return json.loads(json.dumps(document))


def _previous() -> list[dict[str, Any]]:
    return list(json.loads(PREVIOUS.read_text()))


@pytest.mark.parametrize("event", _previous(), ids=lambda e: str(e["event_type"]))
def test_a_message_the_previous_revision_wrote_reads_the_same(event: dict[str, Any]) -> None:
    message = parse(event["event_type"], event["message"], event["db"], event["table"])
    assert isinstance(message, SPECS[EventType(event["event_type"])].message)
    assert facts(message) == event["facts"]
    assert _as_json(message.document()) == event["message"]


def test_the_same_calls_log_the_documents_the_previous_revision_logged(tmp_path: Path) -> None:
    now = run(tmp_path)
    before = _previous()
    assert [e["event_type"] for e in now] == [e["event_type"] for e in before]
    for new, old in zip(now, before, strict=True):
        assert new == old, f"{old['event_type']} of {old['table']} is logged differently"


def test_a_message_without_its_types_fields_is_refused_in_one_line() -> None:
    with pytest.raises(PayloadFormatError) as caught:
        parse("ALTER_TABLE", {"before": {"table_name": "t"}, "after": "not a table"}, "db", "t")
    assert "ALTER_TABLE message" in str(caught.value) and "\n" not in str(caught.value)


def test_handler_tables_receive_the_message_class_of_their_event_type() -> None:
    """Each entry of the load's and the metadata cache's tables declares the message class SPECS gives its
    event type (or a base of it): the entry reads typed fields with no downcast, and the check is here."""
    from hmsrepl.cache.apply import HANDLERS as CACHE_HANDLERS
    from hmsrepl.replication.event_handlers import HANDLERS as LOAD_HANDLERS

    for table, position in ((LOAD_HANDLERS, 2), (CACHE_HANDLERS, 2)):
        for kind, handler in table.items():
            name = list(inspect.signature(handler).parameters)[position]
            declared = typing.get_type_hints(handler)[name]
            union = isinstance(declared, types.UnionType) or typing.get_origin(declared) is typing.Union
            accepted = typing.get_args(declared) if union else (declared,)
            wanted = SPECS[EventType(kind)].message
            classes = [typing.get_origin(t) or t for t in accepted]
            assert any(isinstance(c, type) and issubclass(wanted, c) for c in classes), (
                f"{kind}: {handler.__qualname__} takes {declared}, not {wanted.__name__}"
            )


def test_struct_field_names_are_the_documents_keys() -> None:
    """No field is renamed on the wire: a document's keys are the payload's field names."""
    for payload_type in PAYLOAD_TYPES:
        for field in mi.type_info(payload_type).fields:  # type: ignore[union-attr]
            assert field.name == field.encode_name
    assert msgspec.structs.fields(PAYLOAD_TYPES[0])
