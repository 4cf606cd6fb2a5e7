"""Contained locations, attacked through the Thrift port of a real ``hmsrepl metastore serve`` process.

Each attack is what a client on the network can send. Every file that must stay untouched (a directory
outside the roots, another database's files, cmroot, the trash) is hashed before and after: each attack
must be refused with a one-line error naming the object, the location and the setting to change, and
change nothing.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as h2

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from tests.backends import temporary_database
from tests.security.untouched import tree_hashes
from tests.servers import Hive2Client, RunningMetastore, metastore_server

REFUSED = (h2.InvalidObjectException, h2.MetaException, h2.InvalidOperationException)
BOUND_SECONDS = 10.0


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningMetastore]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    root = tmp_path_factory.mktemp(f"locations-{request.param}")
    (root / "landing").mkdir()
    env = {
        "HMSREPL_TRASH_ROOT": str(root / "trash"),
        "HMSREPL_EXTERNAL_ROOTS": json.dumps([str(root / "landing")]),
    }
    with temporary_database(request.param, str(root)) as url, metastore_server(root, url, **env) as running:
        yield running


@pytest.fixture
def client(server: RunningMetastore) -> Iterator[Hive2Client]:
    c = Hive2Client(server.port, timeout_ms=60_000, user="hive")
    yield c
    c.close()


@pytest.fixture
def world(server: RunningMetastore, client: Hive2Client) -> dict[str, Path]:
    """A victim directory outside every root and a database ``victim`` with a table holding a file."""
    root = Path(server.warehouse).parent
    outside = root / "outside"
    (outside / "sub").mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_bytes(b"not the metastore's")
    (outside / "sub" / "deep.bin").write_bytes(os.urandom(64))
    try:
        client.get_database("victim")
    except h2.NoSuchObjectException:
        client.create_database(h2.Database(name="victim", description=None, locationUri=None, parameters={}))
        client.create_table(_table("victim", "facts"))
    facts = Path(client.get_table("victim", "facts").sd.location.removeprefix("file:"))
    (facts / "000000_0").write_bytes(b"1\n2\n3\n")
    (root / "trash" / "Current").mkdir(parents=True, exist_ok=True)
    return {
        "root": root,
        "outside": outside,
        "victim_db": Path(server.warehouse) / "victim.db",
        "facts": facts,
        "cmroot": Path(server.cmroot),
        "trash": root / "trash",
    }


def _table(db: str, name: str, location: str | None = None, *, external: bool = False) -> h2.Table:
    sd = h2.StorageDescriptor(
        cols=[h2.FieldSchema("a", "int", None)],
        location=location,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=h2.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    return h2.Table(
        tableName=name,
        dbName=db,
        owner="mallory",
        sd=sd,
        partitionKeys=[],
        parameters={"EXTERNAL": "TRUE"} if external else {},
        tableType="EXTERNAL_TABLE" if external else "MANAGED_TABLE",
    )


def _guarded(world: dict[str, Path]) -> dict[str, str]:
    return tree_hashes(world["outside"], world["victim_db"], world["cmroot"], world["trash"])


def _refused(call, *args, fragments: tuple[str, ...]) -> str:
    with pytest.raises(REFUSED) as info:
        call(*args)
    message = info.value.message
    assert "\n" not in message and "Traceback" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def _db(name: str, location: str) -> h2.Database:
    return h2.Database(name=name, description=None, locationUri=location, parameters={})


def test_database_at_another_databases_directory_is_refused(
    client: Hive2Client, world: dict[str, Path]
) -> None:
    before = _guarded(world)
    for location in (
        str(world["victim_db"]),
        f"file:{world['victim_db']}/",
        f"{world['victim_db']}/../victim.db",
    ):
        _refused(
            client.create_database, _db("evil", location), fragments=("database 'evil'", "database 'victim'")
        )
    _refused(
        client.create_database,
        _db("evil", str(world["facts"])),
        fragments=("lies inside", "database 'victim'"),
    )
    _refused(
        client.create_database, _db("evil", str(world["victim_db"] / "inner")), fragments=("lies inside",)
    )
    with pytest.raises(h2.NoSuchObjectException):
        client.drop_database("evil", True, True)
    assert _guarded(world) == before
    assert client.get_table("victim", "facts").sd.location


def test_database_at_the_warehouse_itself_is_refused(
    server: RunningMetastore, client: Hive2Client, world: dict[str, Path]
) -> None:
    before = _guarded(world)
    for location in (f"{server.warehouse}/.", f"file://{server.warehouse}", f"{server.warehouse}/x/.."):
        _refused(client.create_database, _db("evil", location), fragments=("database 'evil'", "root itself"))
    assert _guarded(world) == before


def test_database_at_cmroot_trash_or_outside_is_refused(
    server: RunningMetastore, client: Hive2Client, world: dict[str, Path]
) -> None:
    before = _guarded(world)
    for location, setting in (
        (server.cmroot, "HMSREPL_CMROOT"),
        (f"{server.cmroot}/x", "HMSREPL_CMROOT"),
        (str(world["trash"]), "HMSREPL_TRASH_ROOT"),
        ("/", "HMSREPL_CMROOT"),
        (str(world["outside"]), "HMSREPL_MANAGED_ROOTS"),
        ("/etc", "HMSREPL_MANAGED_ROOTS"),
    ):
        _refused(
            client.create_database,
            _db("evil", location),
            fragments=("database 'evil'", f"'{location}'", setting),
        )
    for bad in ("relative/dir", f"{server.warehouse}/evil\x00.db", f"{server.warehouse}/e\nvil.db"):
        _refused(client.create_database, _db("evil", bad), fragments=("database 'evil'",))
    assert _guarded(world) == before


def test_managed_table_elsewhere_is_refused_and_a_drop_touches_nothing(
    client: Hive2Client, world: dict[str, Path]
) -> None:
    client.create_database(_db("attack", "")) if "attack" not in client.get_all_databases() else None
    before = _guarded(world)
    for location in (
        str(world["outside"]),
        str(world["victim_db"]),
        str(world["facts"]),
        str(world["cmroot"]),
    ):
        _refused(client.create_table, _table("attack", "grab", location), fragments=("table 'attack.grab'",))
        with pytest.raises(h2.NoSuchObjectException):
            client.drop_table("attack", "grab", True)
    # A legitimate table cannot be moved onto foreign data either.
    client.create_table(_table("attack", "mine"))
    moved = client.get_table("attack", "mine")
    moved.sd.location = f"{world['victim_db']}/facts"
    _refused(client.alter_table, "attack", "mine", moved, fragments=("table 'attack.mine'", "victim.facts"))
    moved.sd.location = f"{client.get_table('attack', 'mine').sd.location}/../../../outside"
    _refused(client.alter_table, "attack", "mine", moved, fragments=("outside the managed roots",))
    client.drop_table("attack", "mine", True)
    assert _guarded(world) == before


def test_locations_longer_than_their_stored_keys_are_still_told_apart(
    client: Hive2Client, world: dict[str, Path]
) -> None:
    """Overlap candidates are found by a lookup key cut to 600 characters: a victim table deeper than that is
    still guarded from a table above or inside it, and a sibling sharing the cut key is told apart exactly."""
    client.create_database(_db("deep", "")) if "deep" not in client.get_all_databases() else None
    stem = world["victim_db"] / ("d" * 230) / ("e" * 230)
    if "long" not in client.get_all_tables("victim"):
        client.create_table(_table("victim", "long", str(stem / ("f" * 230))))
    victim = Path(client.get_table("victim", "long").sd.location.removeprefix("file:"))
    assert len(str(victim)) > 600
    (victim / "000000_0").write_bytes(os.urandom(32))
    before = _guarded(world)
    for location in (stem, victim, victim / "inner"):
        _refused(client.create_table, _table("deep", "grab", str(location)), fragments=("victim.long",))
    # Same first 600 characters, another directory: allowed, and its drop removes only its own.
    client.create_table(_table("deep", "beside", str(stem / ("f" * 229 + "g"))))
    client.drop_table("deep", "beside", True)
    assert _guarded(world) == before


def test_external_table_on_a_foreign_directory_is_refused(
    server: RunningMetastore, client: Hive2Client, world: dict[str, Path]
) -> None:
    client.create_database(_db("ext", "")) if "ext" not in client.get_all_databases() else None
    before = _guarded(world)
    for location, setting in (
        (str(world["outside"]), "HMSREPL_EXTERNAL_ROOTS"),
        (f"{world['root']}/landing/../outside", "HMSREPL_EXTERNAL_ROOTS"),
        (f"file://{world['root']}/landing/x/../../outside/sub", "HMSREPL_EXTERNAL_ROOTS"),
        (server.cmroot, "HMSREPL_CMROOT"),
        (f"{world['root']}/landing/../trash", "HMSREPL_TRASH_ROOT"),
    ):
        _refused(
            client.create_table,
            _table("ext", "peek", location, external=True),
            fragments=("table 'ext.peek'", setting),
        )
    # Inside a configured external root it is allowed, and dropping it keeps the data.
    landing = world["root"] / "landing" / "feed"
    landing.mkdir(exist_ok=True)
    (landing / "f.csv").write_bytes(b"1\n")
    client.create_table(_table("ext", "feed", str(landing), external=True))
    client.drop_table("ext", "feed", True)
    assert (landing / "f.csv").read_bytes() == b"1\n"
    after = _guarded(world)
    # The one new entry is the pin of the recorded file: a link to it under its cmroot name, nothing copied.
    [pin] = after.keys() - before.keys()
    assert Path(pin).parent == world["cmroot"] and os.path.samefile(pin, landing / "f.csv")
    assert {k: v for k, v in after.items() if k != pin} == before


def test_trash_adoption_never_leaves_the_trash(
    server: RunningMetastore, client: Hive2Client, world: dict[str, Path]
) -> None:
    client.create_database(_db("tr", "")) if "tr" not in client.get_all_databases() else None
    client.create_table(_table("tr", "t"))
    location = client.get_table("tr", "t").sd.location
    # The trash entry for the table's directory is a link to foreign data: adoption must not follow it.
    trashed = Path(str(world["trash"] / "Current") + location.removeprefix("file:"))
    trashed.parent.mkdir(parents=True, exist_ok=True)
    trashed.symlink_to(world["outside"], target_is_directory=True)
    before = _guarded(world)
    table = client.get_table("tr", "t")
    table.parameters["touched"] = "1"
    client.alter_table("tr", "t", table)  # adopts from the trash: must find nothing
    table.sd.location = f"{location}/../../../trash/Current/../../outside"
    _refused(client.alter_table, "tr", "t", table, fragments=("table 'tr.t'",))
    client.drop_table("tr", "t", True)
    assert _guarded(world) == before
    store = Metastore.open(server.config, create_schema=False)
    try:
        recycled = [
            EncodedFileUri.decode(uri).file_uri
            for event in store.events.next_events(0, table_name="t", db_name="tr")
            for uri in event.body().get("recycled") or []
        ]
    finally:
        store.close()
    assert recycled == []


def test_fifo_and_device_links_in_a_location_are_skipped_within_a_bound(
    server: RunningMetastore, client: Hive2Client, world: dict[str, Path]
) -> None:
    client.create_database(_db("odd", "")) if "odd" not in client.get_all_databases() else None
    client.create_table(_table("odd", "t"))
    directory = Path(client.get_table("odd", "t").sd.location.removeprefix("file:"))
    (directory / "000000_0").write_bytes(b"real rows\n")
    os.mkfifo(directory / "pipe")
    (directory / "zero").symlink_to("/dev/zero")
    (directory / "stolen").symlink_to(world["outside"] / "secret.txt")
    (directory / "elsewhere").symlink_to(world["outside"], target_is_directory=True)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(directory / "sock"))
    before = _guarded(world)
    table = client.get_table("odd", "t")
    table.parameters["touched"] = "1"
    start = time.monotonic()
    client.alter_table("odd", "t", table)  # lists and checksums the directory
    assert time.monotonic() - start < BOUND_SECONDS
    other = Hive2Client(server.port, timeout_ms=60_000, user="hive")  # the server still answers others
    try:
        start = time.monotonic()
        assert "odd" in other.get_all_databases()
        assert time.monotonic() - start < BOUND_SECONDS
    finally:
        other.close()
    store = Metastore.open(server.config, create_schema=False)
    try:
        last = store.events.next_events(0, db_name="odd", table_name="t")[-1]
        listed = [EncodedFileUri.decode(uri).file_uri for uri in last.body()["data"]["added"]]
    finally:
        store.close()
    assert [name.rsplit("/", 1)[-1] for name in listed] == ["000000_0"]
    start = time.monotonic()
    client.drop_table("odd", "t", True)
    assert time.monotonic() - start < BOUND_SECONDS
    sock.close()
    after = _guarded(world)  # the drop recycled the one real file into cmroot; nothing else changed
    assert {path: after.get(path) for path in before} == before
    assert [path for path in after if path not in before] == [
        path for path in after if path.startswith(str(world["cmroot"])) and "000000_0" in path
    ]
