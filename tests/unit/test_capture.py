"""Capture proportional to the change: writes read only new or changed files and log only the diff."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.formats import listing_digest
from hmsrepl.metastore import Metastore, capture, listings
from hmsrepl.metastore.capture import same_stat
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import NotificationEvent
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.messages import DataChange, checksum_of, relative_path
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.storage.base import FileStatus
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import LocalFileSystem, local_path
from tests.conftest import make_config
from tests.helpers import create_db_and_table, dumped_partitions, make_partition, settle, write_file


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Metastore]:
    metastore = Metastore.open(make_config(f"sqlite:///{tmp_path}/metastore.db", tmp_path))
    yield metastore
    metastore.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file a capture reads (identify: the checksum and version of one file)."""
    seen: list[str] = []
    original = LocalFileSystem.identify

    def counting(self: LocalFileSystem, uri: str):  # type: ignore[no-untyped-def]
        seen.append(uri)
        return original(self, uri)

    monkeypatch.setattr(LocalFileSystem, "identify", counting)
    return seen


def _partitioned(store: Metastore, files: int) -> tuple[Table, Partition]:
    table = create_db_and_table(store, partition_keys=("d",))
    [part] = store.catalog.add_partitions("sales", "orders", [make_partition(table, "1")])
    for i in range(files):
        write_file(part.sd.location, f"part-{i:05d}.parquet", f"row {i}".encode())
    settle()
    store.catalog.insert("sales", "orders", ["1"])
    return table, part


def _spark_append(store: Metastore, part: Partition, name: str, data: bytes) -> list[NotificationEvent]:
    """What Spark's Hive client does for an append: write the file, alter_partition, fire_listener_event."""
    before = store.get_current_notification_event_id()
    uri = write_file(part.sd.location, name, data)
    settle()
    store.catalog.alter_partitions("sales", "orders", [part])
    store.catalog.insert("sales", "orders", ["1"], new_files=[uri])
    return store.events.next_events(before)


def _change(event: NotificationEvent) -> DataChange:
    [obj] = parse_event(event).objects()
    return obj.change


def _disk_digest(location: str) -> tuple[int, str]:
    root = Path(local_path(location))
    entries = [
        (str(p.relative_to(root)), checksum_bytes(p.read_bytes()))
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(("_", "."))
    ]
    return len(entries), listing_digest.of(entries)


def test_append_reads_only_the_new_file_and_the_pair_records_it_once(
    store: Metastore, reads: list[str]
) -> None:
    _, part = _partitioned(store, 40)
    reads.clear()
    alter, insert = _spark_append(store, part, "part-new.parquet", b"appended rows")
    assert [os.path.basename(uri) for uri in reads] == ["part-new.parquet"]
    first, second = _change(alter), _change(insert)
    assert [relative_path(f) for f in first.added] == ["part-new.parquet"]
    assert (first.removed, first.complete, first.count) == ((), False, 41)
    assert second.is_empty and (second.count, second.digest) == (41, first.digest)
    # fire_listener_event still names the file the client wrote, with its recorded checksum.
    assert [checksum_of(f) for f in insert.body()["new_files"]] == [checksum_bytes(b"appended rows")]


def test_event_size_does_not_grow_with_the_partition(store: Metastore, tmp_path: Path) -> None:
    sizes = []
    for files in (5, 400):
        metastore = Metastore.open(
            make_config(f"sqlite:///{tmp_path}/m{files:03d}.db", tmp_path / f"w{files:03d}")
        )
        _, part = _partitioned(metastore, files)
        events = _spark_append(metastore, part, "part-new.parquet", b"x" * 10)
        sizes.append([len(json.dumps(e.body()["data"])) for e in events])
        metastore.close()
    for small, large in zip(*sizes, strict=True):
        assert abs(small - large) <= 4  # only the file count's digits differ


def test_an_append_stores_under_2_kb_in_the_log(store: Metastore) -> None:
    """Both events of a Spark append, as the log stores them (snapshots compressed): at most 2 KB."""
    _, part = _partitioned(store, 40)
    events = _spark_append(store, part, "part-new.parquet", b"appended rows")
    assert sum(len(e.message) for e in events) <= 2048
    assert [e.body()["data"]["count"] for e in events] == [41, 41]  # and readers decode them


def test_overwrite_is_a_complete_change_and_recycles_the_others(store: Metastore, reads: list[str]) -> None:
    """The files an overwrite leaves out are recycled with the checksums recorded for them, unread."""
    _, part = _partitioned(store, 3)
    new = write_file(part.sd.location, "fresh.parquet", b"new data")
    settle()
    before = store.get_current_notification_event_id()
    reads.clear()
    store.catalog.insert("sales", "orders", ["1"], new_files=[new], replace=True)
    [event] = store.events.next_events(before)
    change = _change(event)
    assert change.complete and change.removed == () and change.count == 1
    assert [relative_path(f) for f in change.added] == ["fresh.parquet"]
    assert sorted((relative_path(f), checksum_of(f)) for f in event.body()["recycled"]) == [
        (f"part-{i:05d}.parquet", checksum_bytes(f"row {i}".encode())) for i in range(3)
    ]
    assert [uri.rsplit("/", 1)[1] for uri in reads] == ["fresh.parquet"]
    assert _disk_digest(part.sd.location) == (1, change.digest)


def test_a_partial_overwrite_logs_the_removed_paths(store: Metastore) -> None:
    """Files kept by an overwrite (named again) survive: the change removes the others by path."""
    _, part = _partitioned(store, 3)
    kept = f"{part.sd.location}/part-00001.parquet"
    before = store.get_current_notification_event_id()
    store.catalog.insert("sales", "orders", ["1"], new_files=[kept], replace=True)
    [event] = store.events.next_events(before)
    change = _change(event)
    assert (change.added, change.complete, change.count) == ((), False, 1)
    assert sorted(change.removed) == ["part-00000.parquet", "part-00002.parquet"]
    [named] = event.body()["new_files"]  # the kept file, named with the checksum recorded for it
    assert (relative_path(named), checksum_of(named)) == ("part-00001.parquet", checksum_bytes(b"row 1"))


def test_truncate_is_a_complete_empty_change_and_forgets_the_files(store: Metastore) -> None:
    table, _ = _partitioned(store, 2)
    before = store.get_current_notification_event_id()
    store.catalog.truncate_table("sales", "orders", ["d=1"])
    change = _change(store.events.next_events(before)[0])
    assert (change.added, change.complete, change.count, change.digest) == ((), True, 0, listing_digest.EMPTY)
    with store.events.reader() as conn:
        [part_id] = store.catalog.core.part_ids(conn, table.id or 0, ["d=1"]).values()
        assert listings.read(conn, ObjectKey(table.id or 0, part_id)) == {}
        assert listings.summary(conn, ObjectKey(table.id or 0, part_id)) == listings.Summary(0)


@pytest.mark.parametrize("drop", ["table", "partition"])
def test_drops_forget_the_recorded_files(store: Metastore, drop: str) -> None:
    table, _ = _partitioned(store, 2)
    with store.events.reader() as conn:
        [part_id] = store.catalog.core.part_ids(conn, table.id or 0, ["d=1"]).values()
        assert len(listings.read(conn, ObjectKey(table.id or 0, part_id))) == 2
    if drop == "table":
        store.catalog.drop_table("sales", "orders")
    else:
        store.catalog.drop_partitions("sales", "orders", [["1"]])
    with store.events.reader() as conn:
        key = ObjectKey(table.id or 0, part_id)
        assert listings.read(conn, key) == {}
        assert listings.summary(conn, key) == listings.Summary(0)


def test_drop_recycles_with_recorded_checksums_without_reading(store: Metastore, reads: list[str]) -> None:
    _partitioned(store, 5)
    reads.clear()
    before = store.get_current_notification_event_id()
    store.catalog.drop_partitions("sales", "orders", [["1"]])
    [event] = store.events.next_events(before)
    [recycled] = event.body()["recycled"]
    assert len(recycled) == 5
    assert reads == []  # the event's checksums are the recorded ones (recycling verifies its copies)


def test_deltas_rebuild_the_listing_and_the_digest_is_the_full_listings(store: Metastore) -> None:
    """Random appends, rewrites and deletions: applying every event's change in order gives exactly the
    files on disk, and each digest equals the digest of the whole listing."""
    rng = random.Random(13)
    _, part = _partitioned(store, 0)
    root = Path(local_path(part.sd.location))
    held: dict[str, str] = {}
    start = store.get_current_notification_event_id() - 1
    for step in range(40):
        present = sorted(p.name for p in root.iterdir() if p.is_file())
        action = rng.choice(["add", "add", "rewrite", "delete"]) if present else "add"
        if action == "add":
            write_file(part.sd.location, f"f{step}.parquet", os.urandom(rng.randint(1, 50)))
        elif action == "rewrite":
            write_file(part.sd.location, rng.choice(present), os.urandom(rng.randint(51, 90)))
        else:
            os.unlink(root / rng.choice(present))
        store.catalog.alter_partitions("sales", "orders", [part])
    for event in store.events.next_events(start):
        if event.event_type in ("ALTER_PARTITION", "INSERT", "ADD_PARTITION"):
            change = _change(event)
            held = change.apply(held)
            change.check(held, "d=1")
    assert {rel: checksum_of(enc) for rel, enc in held.items()} == {
        p.name: checksum_bytes(p.read_bytes()) for p in root.iterdir() if p.is_file()
    }
    assert _disk_digest(part.sd.location)[1] == _change(store.events.next_events(start)[-1]).digest


def test_a_rewritten_file_is_read_again_and_logged_as_added(store: Metastore, reads: list[str]) -> None:
    _, part = _partitioned(store, 3)
    write_file(part.sd.location, "part-00001.parquet", b"rewritten, longer")
    settle()
    reads.clear()
    before = store.get_current_notification_event_id()
    store.catalog.alter_partitions("sales", "orders", [part])
    change = _change(store.events.next_events(before)[0])
    assert [os.path.basename(uri) for uri in reads] == ["part-00001.parquet"]
    assert [checksum_of(f) for f in change.added] == [checksum_bytes(b"rewritten, longer")]
    assert change.removed == () and change.count == 3


@pytest.mark.parametrize("how", ["touched", "copied over itself"])
def test_a_file_with_a_new_time_but_the_same_bytes_is_read_once_and_not_logged(
    store: Metastore, reads: list[str], how: str
) -> None:
    """Its record takes the new time (the next write does not read it again); the event logs nothing, so a
    replica keeps its copy as it is instead of taking the file again."""
    _, part = _partitioned(store, 3)
    path = Path(local_path(part.sd.location or "")) / "part-00001.parquet"
    if how == "touched":
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - 5_000_000_000))
    else:
        copy = path.with_name(".copy")
        copy.write_bytes(path.read_bytes())
        os.replace(copy, path)
        settle()
    digest = _disk_digest(part.sd.location or "")
    reads.clear()
    before = store.get_current_notification_event_id()
    store.catalog.alter_partitions("sales", "orders", [part])
    [event] = store.events.next_events(before)
    change = _change(event)
    assert [os.path.basename(uri) for uri in reads] == ["part-00001.parquet"]
    assert change.is_empty and (change.count, change.digest) == digest
    reads.clear()
    store.catalog.alter_partitions("sales", "orders", [part])
    assert reads == []
    # A rewrite with other bytes is still logged (test_a_rewritten_file_is_read_again_and_logged_as_added).


def test_a_same_size_rewrite_in_the_clock_tick_of_its_capture_is_still_logged(
    store: Metastore, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file listed within a clock tick of its write may be rewritten with the same size in that tick and
    keep its time: it is recorded without its time, and the next write reads it again and logs the new
    bytes. (The tick is made an hour long here, so the first capture falls in it however slow the run.)"""
    _, part = _partitioned(store, 1)
    path = Path(local_path(part.sd.location or "")) / "part-00000.parquet"
    monkeypatch.setattr(capture, "CLOCK_TICK_NS", 3_600 * capture.SECOND_NS)
    path.write_bytes(b"first")
    stamp = path.stat().st_mtime_ns
    store.catalog.alter_partitions("sales", "orders", [part])
    path.write_bytes(b"again")
    os.utime(path, ns=(stamp, stamp))  # the same tick: size and time as recorded
    monkeypatch.setattr(capture, "CLOCK_TICK_NS", 1)
    reads.clear()
    before = store.get_current_notification_event_id()
    store.catalog.alter_partitions("sales", "orders", [part])
    change = _change(store.events.next_events(before)[0])
    assert [checksum_of(f) for f in change.added] == [checksum_bytes(b"again")]
    assert [os.path.basename(uri) for uri in reads] == ["part-00000.parquet"]
    reads.clear()
    store.catalog.alter_partitions("sales", "orders", [part])  # settled now: trusted, not read
    assert reads == []


def test_only_files_within_a_tick_of_their_listing_are_unsettled() -> None:
    tick, second = capture.CLOCK_TICK_NS, capture.SECOND_NS
    written = 1_700_000_000 * second + 123_456_789
    assert not capture.settled(written, written + tick - 1)
    assert capture.settled(written, written + tick)
    assert not capture.settled(written, written - 5 * second)  # a time ahead of the clock (a skewed server)
    # A whole-second time comes from a file system that keeps seconds: unsettled for a second.
    assert not capture.settled(1_700_000_000 * second, 1_700_000_000 * second + tick)
    assert capture.settled(1_700_000_000 * second, 1_700_000_001 * second)


def test_recorded_file_is_pinned_and_survives_deletion_by_the_writer(store: Metastore) -> None:
    """A writer without Hadoop trash deletes files the metastore recorded: the cmroot pin still serves."""
    _, part = _partitioned(store, 0)
    uri = write_file(part.sd.location, "part-00000.parquet", b"the recorded content")
    before = store.get_current_notification_event_id()
    store.catalog.alter_partitions("sales", "orders", [part])
    [encoded] = _change(store.events.next_events(before)[0]).added
    pin = store.cm.cm_uri(uri, checksum_bytes(b"the recorded content"))
    assert os.path.samefile(local_path(uri), local_path(pin))  # a hard link: no bytes copied
    os.unlink(local_path(uri))
    resolved = store.cm.resolve(encoded)
    assert resolved == pin
    assert store.cm.resolve(encoded, verify=True) == pin
    with open(local_path(resolved), "rb") as handle:
        assert checksum_bytes(handle.read()) == checksum_of(encoded)


def test_a_loads_listing_is_recorded_without_reading(store: Metastore, reads: list[str]) -> None:
    _, part = _partitioned(store, 2)
    first = f"{part.sd.location}/part-00000.parquet"
    added = write_file(part.sd.location, "loaded.parquet", b"copied by a load")
    applied = [
        store.cm.encode(first, checksum_bytes(b"row 0")),
        store.cm.encode(added, checksum_bytes(b"copied by a load")),
    ]
    reads.clear()
    before = store.get_current_notification_event_id()
    store.catalog.alter_partitions("sales", "orders", [part], applied_files=[applied])
    change = _change(store.events.next_events(before)[0])
    assert reads == []
    assert [relative_path(f) for f in change.added] == ["loaded.parquet"]
    assert change.removed == ("part-00001.parquet",)  # not in the published listing
    assert change.count == 2
    assert change.digest == listing_digest.of(
        [
            ("part-00000.parquet", checksum_bytes(b"row 0")),
            ("loaded.parquet", checksum_bytes(b"copied by a load")),
        ]
    )


def test_a_named_file_that_is_not_there_is_refused_and_nothing_is_recorded(store: Metastore) -> None:
    table, part = _partitioned(store, 1)
    write_file(part.sd.location, "other.parquet", b"not named")
    before = store.get_current_notification_event_id()
    with pytest.raises(Exception, match="were not found under"):
        store.catalog.insert("sales", "orders", ["1"], new_files=[f"{part.sd.location}/missing.parquet"])
    assert store.events.next_events(before) == []
    with store.events.reader() as conn:
        [part_id] = store.catalog.core.part_ids(conn, table.id or 0, ["d=1"]).values()
        assert sorted(listings.read(conn, ObjectKey(table.id or 0, part_id))) == ["part-00000.parquet"]


def test_an_insert_naming_its_files_looks_at_those_only(store: Metastore, reads: list[str]) -> None:
    """fire_listener_event names the new files: the rest of the partition is not listed again; what
    changed elsewhere (a file removed by hand) is logged by the next full capture."""
    _, part = _partitioned(store, 3)
    os.unlink(local_path(f"{part.sd.location}/part-00000.parquet"))
    new = write_file(part.sd.location, "named.parquet", b"named by the writer")
    settle()
    reads.clear()
    before = store.get_current_notification_event_id()
    store.catalog.insert("sales", "orders", ["1"], new_files=[new])
    store.catalog.alter_partitions("sales", "orders", [part])
    insert, alter = store.events.next_events(before)
    assert [os.path.basename(uri) for uri in reads] == ["named.parquet"]
    first, second = _change(insert), _change(alter)
    assert [relative_path(f) for f in first.added] == ["named.parquet"]
    assert (first.removed, first.count) == ((), 4)
    assert (second.added, second.removed, second.count) == ((), ("part-00000.parquet",), 3)
    assert _disk_digest(part.sd.location) == (3, second.digest)


@pytest.mark.parametrize("name", ["../escape.parquet", "_SUCCESS"])
def test_a_named_file_outside_the_data_files_is_refused(store: Metastore, name: str) -> None:
    _, part = _partitioned(store, 1)
    write_file(part.sd.location, name, b"x")
    before = store.get_current_notification_event_id()
    with pytest.raises(Exception, match="were not found under"):
        store.catalog.insert("sales", "orders", ["1"], new_files=[f"{part.sd.location}/{name}"])
    assert store.events.next_events(before) == []


def test_a_bootstrap_dump_lists_the_warehouse_without_reading_recorded_files(
    store: Metastore, reads: list[str], tmp_path: Path
) -> None:
    from hmsrepl.replication.commands import parse_command
    from hmsrepl.replication.dump import DumpEngine

    _, part = _partitioned(store, 30)
    reads.clear()
    engine = DumpEngine(store, str(tmp_path / "dumps"))
    first = engine.dump(parse_command("REPL DUMP sales"))  # type: ignore[arg-type]
    assert reads == []  # every checksum came from the recorded listing
    # A file changed behind the metastore's back is read, and the dump names its new content.
    changed = Path(local_path(part.sd.location)) / "part-00007.parquet"
    changed.write_bytes(b"rewritten by hand, longer than before")
    second = engine.dump(parse_command("REPL DUMP sales"))  # type: ignore[arg-type]
    assert [os.path.basename(uri) for uri in reads] == ["part-00007.parquet"]
    for dumped, expected in ((first, b"row 7"), (second, changed.read_bytes())):
        listing = dumped_partitions(dumped.dump_dir, "sales", "orders")["d=1"][1] or []
        [entry] = [f for f in listing if relative_path(f) == "part-00007.parquet"]
        assert checksum_of(entry) == checksum_bytes(expected)
        assert len(listing) == 30


def test_a_loads_listing_gives_the_same_checksums_as_its_file_list() -> None:
    from hmsrepl.metastore.applied_files import applied_checksums

    files = {
        "a.parquet": "/w/t/a.parquet#crc32c-00000001-3#/cm#",
        "sub/b.parquet": "/w/t/sub/b.parquet#crc32c-00000002-4#/cm#sub",
        "_SUCCESS": "/w/t/_SUCCESS#crc32c-00000003-0#/cm#",
    }
    view = applied_checksums(files)
    assert dict(view) == dict(applied_checksums(list(files.values())))
    assert dict(view) == {"a.parquet": "crc32c-00000001-3", "sub/b.parquet": "crc32c-00000002-4"}
    assert len(view) == 2 and "_SUCCESS" not in view


def test_object_store_stamps_tell_writes_of_one_second_apart() -> None:
    """S3 reports whole seconds: two writes of one size within a second differ by their ETags only."""
    second = 1_764_000_000.0
    first = FileStatus("s3://b/t/f", 10, second, '"0cc175b9c0f1b6a831c399e269772661"')
    again = FileStatus("s3://b/t/f", 10, second, '"0cc175b9c0f1b6a831c399e269772661"')
    other = FileStatus("s3://b/t/f", 10, second, '"92eb5ffee6ae2fec3ad71c777531578f"')
    assert first.stamp == again.stamp
    assert not same_stat((10, other.stamp), (10, first.stamp))
    assert int(first.stamp) // 1_000_000_000 == int(second)  # still the modification time's second
    # A file system's stamp is its modification time.
    assert FileStatus("/w/t/f", 10, 1.5).stamp == 1_500_000_000
    # A record made before stamps carried the ETag (the whole second) matches that second's stamp, and only
    # that second's: an overwrite made since is in a later second.
    old_record = (10, int(second) * 1_000_000_000)
    assert same_stat((10, first.stamp), old_record)
    later = FileStatus("s3://b/t/f", 10, second + 1, '"0cc175b9c0f1b6a831c399e269772661"')
    assert not same_stat((10, later.stamp), old_record)
    assert not same_stat((11, first.stamp), old_record)
