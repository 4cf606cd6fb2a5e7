"""Decoding Thrift's TJSONProtocol, the form Hive's JSON messages embed objects in (``tableObjJson``...).

Each struct is ``{"<field id>": {"<type tag>": value}}``; lists are ``[elem tag, count, *items]`` and maps
``[key tag, value tag, count, {key: value}]``. The decoder is driven by the tags and by the struct classes
of this product's IDL (``thrift_spec``), so the result is the same struct a Thrift call returns and the
usual converters (``thrift.convert``) apply. Field ids the IDL does not know (a newer Hive) are skipped.
"""

from __future__ import annotations

import json
from typing import Any

from hmsrepl.formats.bounded import loads_bounded

_SCALARS: dict[str, Any] = {
    "tf": lambda raw: bool(raw),
    "i8": int,
    "i16": int,
    "i32": int,
    "i64": int,
    "dbl": float,
    "str": str,
}


def _type_args(info: Any) -> Any:
    """The nested type of a container element or map side: ``ttype`` alone or ``(ttype, args)``."""
    return info[1] if isinstance(info, tuple) else None


def _value(tag: str, raw: Any, args: Any) -> Any:
    if tag in _SCALARS:
        return _SCALARS[tag](raw)
    if tag == "rec":
        return decode_struct(args, raw) if args is not None else None
    if tag in ("lst", "set"):
        elem_tag, _count, *items = raw
        return [_value(elem_tag, item, _type_args(args)) for item in items]
    if tag == "map":
        key_tag, value_tag, _count, pairs = raw
        key_args, value_args = args if isinstance(args, tuple) else (None, None)
        return {
            _key(key_tag, key, _type_args(key_args)): _value(value_tag, value, _type_args(value_args))
            for key, value in pairs.items()
        }
    raise ValueError(f"unknown Thrift JSON type tag '{tag}'")


def _key(tag: str, raw: str, args: Any) -> Any:
    """A map key: JSON object keys are strings, so container keys arrive as JSON text (Hive's skewed
    values map, keyed by lists); those become tuples, which a dict can hold."""
    if tag in _SCALARS:
        return _SCALARS[tag](raw)
    value = _value(tag, json.loads(raw), args)
    return tuple(value) if isinstance(value, list) else value


def decode_struct(cls: Any, doc: dict[str, Any]) -> Any:
    """An instance of the thriftpy2 struct ``cls`` from its TJSONProtocol document."""
    spec = cls.thrift_spec
    values: dict[str, Any] = {}
    for field_id, tagged in doc.items():
        field = spec.get(int(field_id))
        if field is None:
            continue
        ((tag, raw),) = tagged.items()
        args = field[2] if len(field) == 4 else None
        values[field[1]] = _value(tag, raw, args)
    return cls(**values)


def loads(cls: Any, text: str) -> Any:
    """Decode one embedded object, e.g. ``loads(hms.Table, message["tableObjJson"])``."""
    return decode_struct(cls, loads_bounded(text, f"embedded {cls.__name__} (Thrift JSON)"))
