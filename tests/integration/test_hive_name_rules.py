"""Hive's rules for names and partition values, and bad input, as a Thrift client sees them on a real server.

Each refusal is the exception Hive raises (InvalidObjectException for names, MetaException for partition
values and malformed requests), with a one-line message naming the value; nothing is created, no event is
logged and no directory is left to make later.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as h2

from tests.backends import temporary_database
from tests.integration.test_thrift_server import _create_table, _sd, expect
from tests.security.serving import call_header, read_reply, string_field
from tests.servers import Hive2Client, RunningMetastore, metastore_server


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningMetastore]:
    root = tmp_path_factory.mktemp(f"names-{request.param}")
    with temporary_database(request.param, str(root)) as url, metastore_server(root, url) as running:
        yield running


@pytest.fixture
def client(server: RunningMetastore) -> Iterator[Hive2Client]:
    hive = Hive2Client(server.port, timeout_ms=30_000, user="hive")
    try:
        hive.get_database("names")
    except h2.NoSuchObjectException:
        hive.create_database(h2.Database(name="names", description=None, locationUri=None, parameters={}))
        _create_table(hive, "names", "t", [("p", "string")])
    yield hive
    hive.close()


def _tree(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, dirs, _ in os.walk(root) for n in dirs)


def test_identifiers_longer_than_128_characters_are_refused(client: Hive2Client, server) -> None:
    before, event = _tree(server.warehouse), client.get_current_notificationEventId().eventId
    expect(
        h2.InvalidObjectException,
        "(5000 characters)' is too long (5000 characters); use at most 128",
        client.create_database,
        h2.Database(name="d" * 5000, description=None, locationUri=None, parameters={}),
    )
    expect(h2.InvalidObjectException, "use at most 128", _create_table, client, "names", "t" * 129, [])
    expect(
        h2.InvalidObjectException,
        "ASCII letters, digits and '_' only",
        _create_table,
        client,
        "names",
        "ü",
        [],
    )
    assert _tree(server.warehouse) == before
    assert client.get_current_notificationEventId().eventId == event
    _create_table(client, "names", "t" * 128, [])  # Hive's limit itself is accepted
    assert client.get_table("names", "t" * 128).tableName == "t" * 128


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("..", "is a relative directory name"),
        (".", "is a relative directory name"),
        ("a\x00b", "'a\\x00b' for key 'p' of table 'names.t' contains a NUL or control character"),
        ("a\nb", "contains a NUL or control character"),
        ("a/b", "contains '/'"),
        ("x" * 5000, "is too long (5000 characters); use at most 256"),
        ("%" * 100, "makes a directory name of 302 bytes once escaped; file systems allow 255"),
    ],
)
def test_partition_values_hive_refuses_answer_meta_exception(
    client: Hive2Client, server, value: str, fragment: str
) -> None:
    before, event = _tree(server.warehouse), client.get_current_notificationEventId().eventId
    part = h2.Partition(values=[value], dbName="names", tableName="t", sd=_sd(), parameters={})
    expect(h2.MetaException, fragment, client.add_partitions, [part])
    expect(h2.MetaException, fragment, client.add_partition, part)
    assert _tree(server.warehouse) == before
    assert client.get_current_notificationEventId().eventId == event
    assert client.get_partition_names("names", "t", -1) == []


def test_malformed_requests_answer_hive_exceptions_not_internal_errors(client: Hive2Client, server) -> None:
    expect(
        h2.MetaException,
        "partition filter literal '\\x' has a malformed escape",
        client.get_partitions_by_filter,
        "names",
        "t",
        "p = '\\x'",
        -1,
    )
    for call, args in [
        (client.get_database, ("na\x00mes",)),
        (client.get_table, ("names", "t\x00")),
        (client.get_partitions_by_names, ("names", "t", ["p=a\x00"])),
        (client.get_partitions_by_filter, ("names", "t", "p = 'a\x00'", -1)),
    ]:
        try:  # SQLite compares NUL and finds nothing; PostgreSQL refuses it: a Hive exception either way
            found = call(*args)
        except (h2.MetaException, h2.NoSuchObjectException) as exc:
            assert "internal error" not in exc.message
        else:
            assert not found
    # A field sent with another type than the IDL's arrives empty: the answer names it.
    frame = call_header("get_table") + string_field(1, b"names") + struct.pack("!bhi", 8, 2, 3) + b"\x00"
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(frame)
        sock.shutdown(socket.SHUT_WR)
        reply = read_reply(sock, 10)
    assert b"get_table: invalid request: argument 'tbl_name' is missing or has the wrong type" in reply
    assert b"internal error" not in reply


def test_a_partition_name_longer_than_the_metastore_stores_is_refused(client: Hive2Client, server) -> None:
    """Four values of 200 characters each are valid one by one; their name (811 characters) is not."""
    _create_table(
        client, "names", "wide", [("a", "string"), ("b", "string"), ("c", "string"), ("d", "string")]
    )
    part = h2.Partition(values=["v" * 200] * 4, dbName="names", tableName="wide", sd=_sd(), parameters={})
    expect(
        h2.MetaException,
        "has a name of 811 characters once escaped; the metastore stores at most 700",
        client.add_partitions,
        [part],
    )
    assert client.get_partition_names("names", "wide", -1) == []
