"""Messages from outside are read within limits: a gzip bomb from a stock source is refused with its memory
bounded, deep JSON is refused in one line, and ordinary messages still read as before."""

from __future__ import annotations

import base64
import gzip
import io
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from hmsrepl.formats.bounded import MessageLimitError, MessageLimits, inflate_gzip, loads_bounded, read_capped
from hmsrepl.hive_source import tjson
from hmsrepl.hive_source.messages import HiveEvent, decode
from hmsrepl.metastore.events import GZIP_JSON_FORMAT, decode_message, encode_message
from hmsrepl.thrift.idl import hms

MB = 1024 * 1024
REPO = Path(__file__).resolve().parents[2]


def gzip_bomb(inflated_mb: int) -> bytes:
    """A gzip member of a JSON string of ``inflated_mb`` MB of zeros, built a MB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(b'{"message": "')]
    block = b"0" * MB
    parts += [packer.compress(block) for _ in range(inflated_mb)]
    parts += [packer.compress(b'"}'), packer.flush()]
    return b"".join(parts)


def stock_event(message: str, fmt: str = "gzip(json-2.0)") -> HiveEvent:
    return HiveEvent(7, 0, "ADD_PARTITION", "sales", "orders", message, fmt)


def test_a_stock_source_gzip_bomb_is_refused_within_100_mb(tmp_path: Path) -> None:
    bomb = gzip_bomb(700)
    assert len(bomb) < 0.75 * MB  # 0.68 MB that inflates to 700 MB
    message = tmp_path / "bomb.b64"
    message.write_bytes(base64.b64encode(bomb))
    child = f"""
import sys
from pathlib import Path
from hmsrepl.formats.bounded import MessageLimitError
from hmsrepl.hive_source.messages import HiveEvent, decode

def peak():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

event = HiveEvent(7, 0, "ADD_PARTITION", "sales", "orders", Path({str(message)!r}).read_text(), "gzip(json-2.0)")
before = peak()
try:
    decode(event)
except MessageLimitError as exc:
    print(peak() - before, exc)
else:
    print("decoded")
"""
    done = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "include"), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=True,
    )
    grown, _, reason = done.stdout.partition(" ")
    assert int(grown) < 100 * MB, done.stdout
    assert "event 7 (ADD_PARTITION) of the stock metastore inflates beyond" in reason
    assert "a decompression bomb?" in reason


def test_inflated_size_and_ratio_are_capped() -> None:
    generous = MessageLimits(max_inflated_bytes=4 * MB, max_ratio=10_000, max_json_depth=100)
    assert inflate_gzip(gzip.compress(b"x" * (4 * MB)), "m", generous) == b"x" * (4 * MB)
    with pytest.raises(MessageLimitError, match=r"m inflates beyond 4194304 bytes"):
        inflate_gzip(gzip.compress(b"x" * (4 * MB + 1)), "m", generous)
    limits = MessageLimits(max_inflated_bytes=4 * MB, max_ratio=50, max_json_depth=100)
    assert inflate_gzip(gzip.compress(b"x" * MB), "m", limits) == b"x" * MB  # small: no ratio applies
    squeezed = gzip.compress(b"y" * (3 * MB))  # ~3 KB: a ratio far above 50
    with pytest.raises(MessageLimitError, match=r"inflates beyond 1048576 bytes"):
        inflate_gzip(squeezed, "m", limits)
    two_members = gzip.compress(b"a" * 10) + gzip.compress(b"b" * 10)
    assert inflate_gzip(two_members, "m", limits) == b"a" * 10 + b"b" * 10
    with pytest.raises(zlib.error):
        inflate_gzip(gzip.compress(b"z" * 1000)[:-12], "m", limits)


def test_deeply_nested_messages_are_refused_in_one_line() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(
        MessageLimitError, match=r"^event 7 \(ADD_PARTITION\) of the stock metastore nests JSON"
    ):
        decode(stock_event(deep, "json-2.0"))
    packed = base64.b64encode(gzip.compress(deep.encode())).decode()
    with pytest.raises(MessageLimitError, match="deeper than 100 levels"):
        decode(stock_event(packed))
    embedded = json.dumps({"1": {"lst": ["lst", 1, json.loads("[" * 500 + "]" * 500)]}})
    with pytest.raises(MessageLimitError, match="embedded Table"):
        tjson.loads(hms.Table, embedded)
    assert loads_bounded('{"a": [[[1]]]}', "m") == {"a": [[[1]]]}


def test_ordinary_messages_read_as_before() -> None:
    body = {"partitions": [{"values": [str(i)], "sd": {"location": f"/w/t/p={i}"}} for i in range(2000)]}
    text, fmt = encode_message(body, compress=True, compress_min_bytes=1)
    assert fmt == GZIP_JSON_FORMAT and decode_message(text, fmt) == body
    packed = base64.b64encode(gzip.compress(json.dumps(body).encode())).decode()
    assert decode(stock_event(packed)) == body


def test_our_own_compressed_events_are_capped_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HMSREPL_MESSAGE_MAX_INFLATED_BYTES", str(2 * MB))
    packed = base64.b64encode(gzip_bomb(3)).decode()
    with pytest.raises(MessageLimitError, match="notification message inflates beyond"):
        decode_message(packed, GZIP_JSON_FORMAT)


def test_iceberg_files_are_read_within_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HMSREPL_MESSAGE_MAX_INFLATED_BYTES", str(2 * MB))
    with pytest.raises(MessageLimitError, match="larger than 2097152 bytes"):
        read_capped(io.BytesIO(b"x" * (2 * MB + 1)), "Iceberg metadata 'm.json'")
    with pytest.raises(MessageLimitError, match=r"Iceberg metadata 'm\.gz\.metadata\.json' inflates beyond"):
        read_capped(io.BytesIO(gzip_bomb(3)), "Iceberg metadata 'm.gz.metadata.json'")
    assert read_capped(io.BytesIO(gzip.compress(b'{"format-version": 2}')), "m") == b'{"format-version": 2}'
