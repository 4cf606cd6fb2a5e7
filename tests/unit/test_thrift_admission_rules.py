"""The Thrift front end's pure parts: where a request ends however its bytes are cut, what it may declare, and
whom a newcomer displaces when connections run out."""

from __future__ import annotations

import random
import struct
import threading
import time
from dataclasses import dataclass, field

import pytest
from thriftpy2.protocol.cybin import TCyBinaryProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TCyMemoryBuffer

from hmsrepl.concurrency import PriorityWorkers
from hmsrepl.thrift.admission import Admission
from hmsrepl.thrift.frames import MAX_DEPTH, MessageRefused, MessageScanner
from hmsrepl.thrift.idl import Service, hms


def encode(api: str, args: object, seqid: int = 7) -> bytes:
    buffer = TCyMemoryBuffer()
    protocol = TCyBinaryProtocol(buffer)
    protocol.write_message_begin(api, TMessageType.CALL, seqid)
    args.write(protocol)  # type: ignore[attr-defined]
    protocol.write_message_end()
    protocol.trans.flush()
    return buffer.getvalue()


def _partitions(count: int) -> list[object]:
    sd = hms.StorageDescriptor(
        cols=[hms.FieldSchema("a", "int", "c")],
        location="s3://b/t",
        parameters={"k": "v"},
        bucketCols=["a"],
        sortCols=[],
        serdeInfo=hms.SerDeInfo("n", "lib", {"a": "b"}),
    )
    return [
        hms.Partition(
            values=[str(i), "x"], dbName="d", tableName="t", sd=sd, parameters={"p": "1"}, createTime=5
        )
        for i in range(count)
    ]


MESSAGES = [
    encode("add_partitions", Service.add_partitions_args(new_parts=_partitions(30))),
    encode(
        "get_partitions_by_names",
        Service.get_partitions_by_names_args("d", "t", ["v" * i for i in range(60)]),
    ),
    encode("get_database", Service.get_database_args(name="default")),
]


@pytest.mark.parametrize("message", MESSAGES, ids=["structs", "strings", "small"])
def test_the_end_of_a_request_is_found_however_its_bytes_are_cut(message: bytes) -> None:
    following = MESSAGES[2]  # a pipelined next request must not be taken as part of this one
    rng = random.Random(1)
    for _ in range(200):
        scanner = MessageScanner(1 << 20)
        buffer = bytearray()
        data = message + following
        end = None
        offset = 0
        while end is None:
            step = rng.randint(1, 400)
            buffer += data[offset : offset + step]
            offset += step
            end = scanner.feed(buffer)
        assert end == len(message)
        assert scanner.seqid == 7
        assert scanner.decoded_estimate > 0


def test_a_declared_string_larger_than_the_request_may_carry_is_refused_before_its_bytes() -> None:
    head = encode("get_database", Service.get_database_args(name="x"))[:-4]  # cut inside the name field
    header = head[: head.index(b"\x0b\x00\x01")] + struct.pack("!bhi", 11, 1, 300 * 1024 * 1024)
    with pytest.raises(MessageRefused, match="a value of 314572800 bytes exceeds the message size limit"):
        MessageScanner(16 * 1024 * 1024).feed(header)


def test_a_request_growing_past_the_limit_is_refused_at_the_limit() -> None:
    message = encode(
        "get_partitions_by_names", Service.get_partitions_by_names_args("d", "t", ["n" * 100] * 2000)
    )
    scanner = MessageScanner(100_000)
    with pytest.raises(MessageRefused, match="larger than the message size limit of 100000 bytes"):
        for cut in range(0, len(message), 4096):
            scanner.feed(message[: cut + 4096])


def test_nesting_deeper_than_the_bound_is_refused() -> None:
    message = encode("get_database", Service.get_database_args(name="x"))
    header = message[: message.index(b"\x0b\x00\x01")]  # the message header, before the first field
    nested = header + b"\x0c\x00\x01" * (MAX_DEPTH + 5)  # struct in struct in struct...
    with pytest.raises(MessageRefused, match=f"nested deeper than {MAX_DEPTH} levels"):
        MessageScanner(1 << 20).feed(nested)


def test_a_plain_thrift_header_that_is_not_binary_protocol_is_refused() -> None:
    with pytest.raises(MessageRefused, match="not a Thrift binary-protocol message"):
        MessageScanner(1 << 20).feed(b"\x82\x21\x01\x0bget_database")


@dataclass(eq=False)
class _Conn:
    host: str
    idle_since: float = 0.0
    admin: bool = False
    name: str = field(default="")

    def __hash__(self) -> int:
        return id(self)


def _hold(admission: Admission, host: str, count: int, idle_since: float) -> list[_Conn]:
    held = []
    for index in range(count):
        allowed, victims = admission.admit(host, idle_since)
        assert allowed and not victims
        conn = _Conn(host, idle_since + index * 0.001)
        admission.add(conn)
        admission.idle(conn)
        held.append(conn)
    return held


def test_a_newcomer_displaces_the_heaviest_address_not_a_light_client() -> None:
    admission = Admission(max_connections=10, per_peer=8, admin_reserved=2, stale_seconds=5)
    light = _hold(admission, "10.0.0.1", 1, idle_since=0.0)  # the oldest idle connection of all
    flood = _hold(admission, "10.0.0.9", 7, idle_since=100.0)
    allowed, victims = admission.admit(
        "10.0.0.2", now=100.5
    )  # fresh flood connections, but the flood outweighs
    assert allowed and victims == [flood[0]]
    assert light[0] not in victims


def test_a_flood_is_refused_rather_than_churning_its_own_fresh_connections() -> None:
    admission = Admission(max_connections=100, per_peer=5, admin_reserved=0, stale_seconds=5)
    own = _hold(admission, "10.0.0.9", 5, idle_since=100.0)
    assert admission.admit("10.0.0.9", now=101.0) == (False, [])  # its own are fresh: refused
    assert admission.admit("10.0.0.9", now=106.0) == (True, [own[0]])  # stale: the longest idle makes room


def test_admin_connections_are_never_displaced_and_keep_their_share() -> None:
    admission = Admission(max_connections=6, per_peer=100, admin_reserved=2, stale_seconds=0)
    admins = _hold(admission, "10.0.0.1", 2, idle_since=0.0)
    for conn in admins:
        admission.promote(conn)
    others = _hold(admission, "10.0.0.2", 4, idle_since=10.0)
    allowed, victims = admission.admit("10.0.0.3", now=20.0)
    assert allowed and victims == [others[0]]  # the others' share is full: one of theirs goes, no admin
    for conn in others:
        admission.active(conn)  # all in a call: nothing may be displaced
    assert admission.admit("10.0.0.3", now=20.0) == (False, [])


def test_admin_calls_go_first_to_a_free_worker() -> None:
    workers = PriorityWorkers(1, "test-worker")
    release = threading.Event()
    order: list[str] = []
    workers.submit(release.wait)  # the only worker is busy
    workers.submit(lambda: order.append("user 1"))
    workers.submit(lambda: order.append("user 2"))
    workers.submit(lambda: order.append("admin"), priority=0)
    release.set()
    deadline = time.monotonic() + 10
    while len(order) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    workers.stop()
    assert order == ["admin", "user 1", "user 2"]
