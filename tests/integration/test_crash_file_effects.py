"""Crash safety of the file work that follows a commit: a process SIGKILLed at chosen points, then restarted.

Each case runs one catalog operation (drop table, drop partition, truncate, overwrite, drop database,
add partitions) in a child process that kills itself at a fault point (``HMSREPL_FAULT_POINT``, see
``hmsrepl.faults``): after the commit before any file work, after the first recycled file, in the middle of
a cross-file-system copy into cmroot, after a verified copy before the original is deleted, and after the
work before its intent row is deleted. cmroot is on the warehouse's file system and on another one (a
tmpfs the test mounts, or /dev/shm). After the restart (``Metastore.open``, the CLI, or a metastore server):
no intent row is left, every file any event names resolves to its content, every cmroot file holds the
content its name promises, and re-created names are empty (no resurrected data).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import thriftpy2
from thriftpy2.rpc import make_client

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import InvalidOperationError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.change_manager import TEMP_PREFIX
from hmsrepl.metastore.file_capture import list_data_files
from hmsrepl.metastore.model import Database
from hmsrepl.storage.base import filesystem_for
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import local_path
from hmsrepl.storage.rooted import RootedFileSystem
from hmsrepl.thrift.idl import IDL_PATH
from tests import python_forks
from tests.helpers import make_partition, make_table, write_file
from tests.servers import REPO, metastore_server

BIG = 2 * 1024 * 1024 + 12345  # more than one copy chunk: a kill mid-copy leaves a truncated temporary file
KILLED = -9


def _mount_tmpfs(path: Path) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(path)], capture_output=True, check=False
    )
    return result.returncode == 0


@pytest.fixture(params=["same_fs", "other_fs"])
def cmroot(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """cmroot beside the warehouse, or on a second file system (a tmpfs mounted here, else /dev/shm)."""
    if request.param == "same_fs":
        yield str(tmp_path / "cmroot")
        return
    mount_point = tmp_path / "other_fs"
    if _mount_tmpfs(mount_point):
        try:
            yield str(mount_point / "cmroot")
        finally:
            subprocess.run(["umount", "-l", str(mount_point)], check=False)
        return
    shm = Path("/dev/shm")
    if shm.is_dir() and os.stat(shm).st_dev != os.stat(tmp_path).st_dev and os.access(shm, os.W_OK):
        root = shm / f"hmsrepl-crash-{uuid.uuid4().hex[:8]}"
        try:
            yield str(root / "cmroot")
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    pytest.skip(
        "no second file system: cannot mount a tmpfs (not root?) and /dev/shm is missing or not separate"
    )


@pytest.fixture
def config(tmp_path: Path, cmroot: str) -> MetastoreConfig:
    return MetastoreConfig(
        db_url=f"sqlite:///{tmp_path}/ms.db", warehouse=str(tmp_path / "wh"), cmroot=cmroot, trash_root=""
    )


def _settings(config: MetastoreConfig) -> dict[str, Any]:
    return {k: getattr(config, k) for k in ("db_url", "warehouse", "cmroot", "trash_root")}


def _populate(config: MetastoreConfig) -> None:
    """Database ``s``: table ``t`` (two files, one bigger than a copy chunk), table ``p`` (partitions a, b)."""
    store = Metastore.open(config)
    catalog = store.catalog
    catalog.create_database(Database(name="s"))
    table = catalog.create_table(make_table("s", "t"))
    write_file(table.sd.location or "", "big.parquet", os.urandom(BIG))
    write_file(table.sd.location or "", "small.parquet", os.urandom(100))
    catalog.insert("s", "t")
    part_table = catalog.create_table(make_table("s", "p", partition_keys=("k",)))
    for value in ("a", "b"):
        (part,) = catalog.add_partitions("s", "p", [make_partition(part_table, value)])
        write_file(part.sd.location or "", "big.parquet", os.urandom(BIG))
        write_file(part.sd.location or "", "small.parquet", os.urandom(10))
        catalog.insert("s", "p", [value])
    write_file(table.sd.location or "", "new.parquet", b"the overwrite's new data")
    store.close()


def _run_child(config: MetastoreConfig, operation: str, point: str | None) -> int:
    env = {**os.environ, "PYTHONPATH": python_forks.PYTHONPATH}
    env.pop("HMSREPL_FAULT_POINT", None)
    if point:
        env["HMSREPL_FAULT_POINT"] = point
    result = python_forks.run_module(
        "tests.crash_child", [operation, json.dumps(_settings(config))], env, timeout=120, cwd=str(REPO)
    )
    assert result.returncode in (0, KILLED), result.stderr[-3000:]
    return result.returncode


def _encoded_uris(value: Any) -> Iterator[str]:
    """Every encoded file URI in an event body (``files``, ``new_files``, ``recycled``, a change's ``added``,
    nested lists)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("files", "new_files", "recycled", "added"):
                yield from _flatten(item)
            else:
                yield from _encoded_uris(item)


def _flatten(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _flatten(item)


def _pending(config: MetastoreConfig) -> int:
    store = Metastore(config)  # no housekeeping: what the crash left
    try:
        return len(store.catalog.intents.pending())
    finally:
        store.close()


def _assert_no_lost_file(store: Metastore) -> int:
    """Every file any event names resolves to its recorded content; returns how many were checked."""
    checked = 0
    for event in store.events.next_events(0):
        for encoded in _encoded_uris(event.body()):
            entry = EncodedFileUri.decode(encoded)
            found = store.cm.resolve(encoded)
            assert filesystem_for(found).checksum(found) == entry.checksum, (event.event_type, encoded)
            checked += 1
    return checked


def _assert_cmroot_holds_what_names_promise(cmroot: str) -> None:
    """A cmroot name ``<file>_<checksum>`` is never a truncated or foreign copy; temporary files aside."""
    root = Path(local_path(cmroot))
    for path in root.rglob("*") if root.exists() else []:
        if path.is_file() and not path.name.startswith(TEMP_PREFIX):
            expected = path.name.rsplit("_", 1)[1]
            assert checksum_bytes(path.read_bytes()) == expected, path


def _assert_converged(config: MetastoreConfig, operation: str) -> None:
    store = Metastore.open(config)  # the restart: completes what the crash left
    try:
        assert store.catalog.intents.pending() == []
        assert _assert_no_lost_file(store) >= 6
        _assert_cmroot_holds_what_names_promise(config.cmroot)
        _assert_not_resurrected(store, operation)
    finally:
        store.close()


def _data_files(location: str | None) -> list[str]:
    if not location:
        return []
    return sorted(
        Path(s.uri).name for s in list_data_files(RootedFileSystem([location], purpose="test"), location)
    )


def _assert_not_resurrected(store: Metastore, operation: str) -> None:
    catalog = store.catalog
    if operation == "drop_table":
        table = catalog.create_table(make_table("s", "t"))
        assert _data_files(table.sd.location) == []
        assert catalog.insert("s", "t") == []
    elif operation == "drop_partition":
        part_table = catalog.get_table("s", "p")
        assert [p.values for p in catalog.get_partitions("s", "p")] == [["b"]]
        (part,) = catalog.add_partitions("s", "p", [make_partition(part_table, "a")])
        assert _data_files(part.sd.location) == []
        assert catalog.insert("s", "p", ["a"]) == []
        assert _data_files(catalog.get_partition("s", "p", ["b"]).sd.location) == [
            "big.parquet",
            "small.parquet",
        ]
    elif operation == "truncate":
        assert _data_files(catalog.get_table("s", "t").sd.location) == []
    elif operation == "overwrite":
        assert _data_files(catalog.get_table("s", "t").sd.location) == ["new.parquet"]
    elif operation == "drop_database":
        catalog.create_database(Database(name="s"))
        table = catalog.create_table(make_table("s", "t"))
        assert _data_files(table.sd.location) == []
        assert _data_files(catalog.get_database("s").location_uri) == []
    else:
        raise AssertionError(operation)


OPERATIONS = ["drop_table", "drop_partition", "truncate", "overwrite", "drop_database"]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize(
    "point", ["after_commit_before_intent", "recycle_after_file", "intent_before_delete_row"]
)
def test_kill_after_commit_then_restart(config: MetastoreConfig, operation: str, point: str) -> None:
    if operation == "drop_database":
        if point == "recycle_after_file":
            pytest.skip("covered by drop_table: drop_database recycles table by table")
        point += "@3"  # the database's own intent, after those of its tables p and t
    _populate(config)
    assert _run_child(config, operation, point) == KILLED
    assert _pending(config) >= 1  # the work the crash interrupted is on record
    _assert_converged(config, operation)


@pytest.mark.parametrize("operation", ["drop_table", "drop_partition", "truncate", "overwrite"])
@pytest.mark.parametrize("point", ["recycle_mid_copy", "recycle_before_delete_source"])
def test_kill_during_a_copy_into_cmroot(
    config: MetastoreConfig, cmroot: str, operation: str, point: str
) -> None:
    """On one file system recycling is a rename (no copy: the point is never reached, the call completes).

    The files' pins (made when they were recorded) are removed first, as retention would: recycling then has
    to copy them into cmroot itself.
    """
    _populate(config)
    shutil.rmtree(local_path(cmroot), ignore_errors=True)
    other_fs = os.stat(local_path(config.warehouse)).st_dev != os.stat(Path(local_path(cmroot)).parent).st_dev
    returncode = _run_child(config, operation, point)
    assert returncode == (KILLED if other_fs else 0)
    if other_fs and point == "recycle_mid_copy":
        leftovers = [p for p in Path(local_path(cmroot)).rglob(f"{TEMP_PREFIX}*")]
        assert leftovers and all(p.stat().st_size < BIG for p in leftovers)  # a truncated temporary copy
    _assert_converged(config, operation)


def test_killed_copy_is_never_trusted_by_the_next_recycle(config: MetastoreConfig) -> None:
    """The data-loss sequence: a kill mid-copy, then the same content recycled again by another drop."""
    _populate(config)
    store = Metastore.open(config)
    twin = store.catalog.create_table(make_table("s", "twin"))
    big = Path(local_path(store.catalog.get_table("s", "t").sd.location or "")) / "big.parquet"
    write_file(twin.sd.location or "", "big.parquet", big.read_bytes())  # same name and content
    store.catalog.insert("s", "twin")
    cm_name = Path(local_path(store.cm.cm_uri(str(big), checksum_bytes(big.read_bytes()))))
    store.close()
    _run_child(config, "drop_table", "recycle_mid_copy")
    # What an unverified copy used to leave: a truncated file under the final name.
    cm_name.parent.mkdir(parents=True, exist_ok=True)
    cm_name.write_bytes(big.read_bytes()[: BIG // 3] if big.exists() else cm_name.read_bytes()[: BIG // 3])
    store = Metastore(config)  # no housekeeping yet: the twin's drop meets the damaged name first
    store.catalog.drop_table("s", "twin")
    assert checksum_bytes(cm_name.read_bytes()) == cm_name.name.rsplit("_", 1)[1]
    store.close()
    _assert_converged(config, "drop_table")


def test_re_created_name_completes_the_pending_drop_first(config: MetastoreConfig) -> None:
    """Without any housekeeping pass, creating the dropped name finishes the drop's file work first."""
    _populate(config)
    assert _run_child(config, "drop_table", "after_commit_before_intent") == KILLED
    store = Metastore(config)
    location = store.catalog.default_db_location("s") + "/t"
    assert _data_files(location) == ["big.parquet", "new.parquet", "small.parquet"]  # left by the crash
    table = store.catalog.create_table(make_table("s", "t"))
    assert _data_files(table.sd.location) == []
    assert store.catalog.intents.pending() == []
    assert _assert_no_lost_file(store) >= 6
    store.close()


def test_create_is_refused_while_the_drop_cannot_be_completed(
    config: MetastoreConfig, tmp_path: Path
) -> None:
    _populate(config)
    assert _run_child(config, "drop_table", "after_commit_before_intent") == KILLED
    cmroot = Path(local_path(config.cmroot))
    shutil.rmtree(cmroot, ignore_errors=True)
    cmroot.parent.mkdir(parents=True, exist_ok=True)
    cmroot.write_bytes(b"not a directory")  # recycling cannot succeed
    store = Metastore(config)
    with pytest.raises(
        InvalidOperationError, match=r"table 's\.t' cannot be created yet.*hmsrepl intents run"
    ):
        store.catalog.create_table(make_table("s", "t"))
    assert store.catalog.get_tables("s") == ["p"]  # nothing changed
    (intent,) = store.catalog.intents.pending()
    assert intent.attempts >= 1 and intent.last_error
    store.close()
    cmroot.unlink()
    env = {**os.environ, "HMSREPL_DB_URL": config.db_url, "HMSREPL_WAREHOUSE": config.warehouse}
    env.update(HMSREPL_CMROOT=config.cmroot, HMSREPL_TRASH_ROOT="", PYTHONPATH=python_forks.PYTHONPATH)
    listed = python_forks.run_cli(["intents", "list"], env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "1 pending file intents" in listed.stdout and "recycle" in listed.stdout
    ran = python_forks.run_cli(["intents", "run"], env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "1 completed, 0 failed" in ran.stdout
    _assert_converged(config, "drop_table")


def test_add_partitions_makes_directories_only_for_what_committed(config: MetastoreConfig) -> None:
    _populate(config)
    store = Metastore(config)
    part_table = store.catalog.get_table("s", "p")
    before = sorted(os.listdir(local_path(part_table.sd.location or "")))
    with pytest.raises(Exception, match="already exists"):
        store.catalog.add_partitions(
            "s",
            "p",
            [make_partition(part_table, f"x{i}") for i in range(100)] + [make_partition(part_table, "a")],
        )
    assert sorted(os.listdir(local_path(part_table.sd.location or ""))) == before  # no orphan directories
    store.close()
    assert _run_child(config, "add_partitions", "after_commit_before_intent") == KILLED
    store = Metastore.open(config)  # the restart makes the committed partitions' directories
    parts = [p for p in store.catalog.get_partitions("s", "p") if p.values[0].startswith("n")]
    assert len(parts) == 50 and all(os.path.isdir(local_path(p.sd.location or "")) for p in parts)
    assert store.catalog.intents.pending() == []
    store.close()


def test_killed_metastore_server_completes_the_drop_on_restart(
    config: MetastoreConfig, tmp_path: Path
) -> None:
    """A real ``hmsrepl metastore serve`` killed between a drop's commit and its recycle, then restarted."""
    _populate(config)
    h3 = thriftpy2.load(str(IDL_PATH), module_name="hms_crash_thrift")
    env = {"HMSREPL_TRASH_ROOT": "", "HMSREPL_CMROOT": config.cmroot, "HMSREPL_WAREHOUSE": config.warehouse}
    root = tmp_path / "server"
    with metastore_server(
        root, config.db_url, HMSREPL_FAULT_POINT="after_commit_before_intent", **env
    ) as server:
        client = make_client(h3.ThriftHiveMetastore, "127.0.0.1", server.port, timeout=30000)
        with pytest.raises(Exception):  # noqa: B017 - the server dies mid-call: any transport error
            client.drop_table("s", "t", True)
        client.close()
    assert _pending(config) == 1
    location = Path(local_path(config.warehouse)) / "s.db" / "t"
    assert sorted(os.listdir(location)) == ["big.parquet", "new.parquet", "small.parquet"]
    with metastore_server(root, config.db_url, **env) as server:  # start-up completes the intent
        assert _pending(config) == 0
        assert not location.exists()
        client = make_client(h3.ThriftHiveMetastore, "127.0.0.1", server.port, timeout=30000)
        assert client.get_all_tables("s") == ["p"]
        client.close()
    _assert_converged(config, "drop_table")


@pytest.mark.parametrize("point", ["after_commit_before_intent", "recycle_after_file"])
def test_kill_on_every_backend(db_url: str, tmp_path: Path, cmroot: str, point: str) -> None:
    """The intent commits with the change on PostgreSQL and MariaDB too (READ COMMITTED, row locks)."""
    config = MetastoreConfig(db_url=db_url, warehouse=str(tmp_path / "wh"), cmroot=cmroot, trash_root="")
    _populate(config)
    assert _run_child(config, "drop_partition", point) == KILLED
    assert _pending(config) == 1
    _assert_converged(config, "drop_partition")
