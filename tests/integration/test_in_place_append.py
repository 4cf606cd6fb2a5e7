"""One new file into a replica object is added in place: copied under a hidden name, renamed after the commit.

A load that adds one file to a table or partition does not make a new version directory (linking every file
the object keeps): it stages the copy in the object's own directory and names it in a publish intent in the
batch's transaction; the intent renames it into place once the batch has committed. So the load costs what
was added, readers never see the file before its metadata, a failed batch leaves nothing behind, and a crash
between the commit and the rename is finished by housekeeping (``Metastore.open``, ``intents run``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hmsrepl.acid import InsertOnlyWriter, visible_files
from hmsrepl.metastore import Metastore, capture
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.intents import FileIntents
from hmsrepl.metastore.model import Function
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import is_staging_name
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.replica_versions import VersionPublisher
from hmsrepl.replication.target import TargetWriter
from hmsrepl.replication.verify import capture_state, diff_states, replica_leftovers, verify
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, make_table, record_listing_writes, write_file
from tests.integration.test_replica_listing import FILES, append, append_two, bootstrap, incremental, seed


def partition_dir(target: Metastore) -> Path:
    return Path(local_path(target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.location or ""))


def staged_copies(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if is_staging_name(p.name)]


def test_one_new_file_is_added_in_place_and_logged_as_one_file(engine, source, target):
    seed(source)
    bootstrap(engine)
    before = partition_dir(target)
    versions = sorted(os.listdir(before.parent))
    append(source, "part-new.parquet", b"new rows")
    replica_head = target.get_current_notification_event_id()
    _, loaded = incremental(engine)
    assert partition_dir(target) == before, "the partition's location moved"
    assert sorted(os.listdir(before.parent)) == versions, "a new version directory was made"
    assert loaded.stats.files_copied == 1 and loaded.stats.files_kept == FILES
    assert (before / "part-new.parquet").read_bytes() == b"new rows"
    assert staged_copies(before) == [] and target.catalog.intents.pending() == []
    assert verify(source, "sales", target, "sales_dr") == []
    # The replica's own event (a replica is a source too) names the one file, with the listing's summary.
    events = target.get_next_notification(replica_head, 10)
    data = [obj.change for event in events for obj in parse_event(event).objects()]
    assert [e.event_type for e in events if e.event_type != "ALTER_DATABASE"] == ["ALTER_PARTITION"]
    [change] = data
    assert [os.path.basename(f.split("#")[0]) for f in change.added] == ["part-new.parquet"]
    assert (change.removed, change.complete, change.count) == ((), False, FILES + 1)


def test_several_new_files_still_take_a_new_version(engine, source, target, monkeypatch):
    """The new version links the kept files (same identity), so the replica records and logs only the
    change: its listing is not listed again, the two records are written once, and its event names the two
    files with the source's summary."""
    seed(source)
    bootstrap(engine)
    before = partition_dir(target)
    append_two(source)
    source_change = parse_event(source.get_next_notification(0, 1000)[-1]).objects()[0].change
    listed: list[str] = []
    real = capture.stat_listing
    monkeypatch.setattr(capture, "stat_listing", lambda location: listed.append(location) or real(location))
    written = record_listing_writes(monkeypatch)
    replica_head = target.get_current_notification_event_id()
    incremental(engine)
    assert sorted(written) == ["part-two-0.parquet", "part-two-1.parquet"]
    after = partition_dir(target)
    assert after != before
    assert verify(source, "sales", target, "sales_dr") == []
    assert [loc for loc in listed if local_path(loc) == str(after)] == [], "the new version was listed"
    events = target.get_next_notification(replica_head, 10)
    [change] = [obj.change for event in events for obj in parse_event(event).objects()]
    assert sorted(os.path.basename(f.split("#")[0]) for f in change.added) == [
        "part-two-0.parquet",
        "part-two-1.parquet",
    ]
    assert (change.removed, change.complete) == ((), False)
    assert (change.count, change.digest) == (FILES + 2, source_change.digest)
    # The record still describes every file of the new version as it is on disk (links keep the identity).
    table = target.catalog.get_table("sales_dr", "orders")
    part = target.catalog.get_partition("sales_dr", "orders", ["d1"])
    [record] = target.catalog.recorded_listings(table, [part]).values()
    on_disk = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in after.iterdir()}
    assert record.keys() == on_disk.keys()
    assert [
        rel for rel, r in record.items() if not capture.same_stat(on_disk[rel], (r.size, r.mtime_ns))
    ] == []


def published_in_order(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The names each batch's publish intent renames, in the order it renames them."""
    seen: list[list[str]] = []
    real = FileIntents.publish

    def spy(self: FileIntents, tx, files) -> None:  # type: ignore[no-untyped-def]
        seen.append([f.split("#", 1)[0].rsplit("/", 1)[1] for f in files])
        real(self, tx, files)

    monkeypatch.setattr(FileIntents, "publish", spy)
    return seen


def test_appends_one_file_at_a_time_in_one_batch_are_added_in_place_in_their_order(
    engine, source, target, monkeypatch
):
    """Three appends between two loads (a streaming writer): no new version, the files renamed in the
    order they were written, so a reader only ever sees a listing the source had."""
    seed(source)
    bootstrap(engine)
    before = partition_dir(target)
    versions = sorted(os.listdir(before.parent))
    for name in ("part-c.parquet", "part-a.parquet", "part-b.parquet"):
        append(source, name, name.encode())
    order = published_in_order(monkeypatch)
    _, loaded = incremental(engine)
    assert partition_dir(target) == before and sorted(os.listdir(before.parent)) == versions
    assert order == [["part-c.parquet", "part-a.parquet", "part-b.parquet"]]
    assert loaded.stats.files_copied == 3
    assert staged_copies(before) == [] and target.catalog.intents.pending() == []
    assert verify(source, "sales", target, "sales_dr") == []


def test_appends_to_an_unpartitioned_table_in_one_batch_are_added_in_place(
    engine, source, target, monkeypatch
):
    seed(source)
    bootstrap(engine)
    location = lambda: target.catalog.get_table("sales_dr", "plain").sd.location  # noqa: E731
    before = location()
    plain = source.catalog.get_table("sales", "plain").sd.location
    for name in ("000001_0", "000002_0"):
        source.catalog.insert("sales", "plain", new_files=[write_file(plain, name, name.encode())])
    order = published_in_order(monkeypatch)
    incremental(engine)
    assert location() == before
    assert order == [["000001_0", "000002_0"]]
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_step_of_several_files_in_the_run_takes_a_new_version(engine, source, target):
    seed(source)
    bootstrap(engine)
    before = partition_dir(target)
    append(source, "part-new.parquet", b"new rows")
    append_two(source)  # two files of one INSERT must appear at once
    append(source, "part-last.parquet", b"last rows")
    incremental(engine)
    assert partition_dir(target) != before
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_load_of_several_appends_that_dies_after_its_commit_publishes_them_on_restart(
    engine, source, target, monkeypatch
):
    seed(source)
    bootstrap(engine)
    append(source, "part-new.parquet", b"new rows")
    append(source, "part-next.parquet", b"next rows")
    monkeypatch.setattr(FileIntents, "_after_commit", lambda self, intent: None)  # gone right after commit
    incremental(engine)
    monkeypatch.undo()
    here = partition_dir(target)
    assert sorted(p.name for p in staged_copies(here)) == [
        ".hmsrepl-staging-part-new.parquet",
        ".hmsrepl-staging-part-next.parquet",
    ]
    assert target.complete_file_intents(lease_seconds=0).completed == 1
    assert staged_copies(here) == [] and (here / "part-next.parquet").read_bytes() == b"next rows"
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_load_that_dies_after_its_commit_publishes_the_file_on_restart(engine, source, target, monkeypatch):
    seed(source)
    bootstrap(engine)
    append(source, "part-new.parquet", b"new rows")
    monkeypatch.setattr(FileIntents, "_after_commit", lambda self, intent: None)  # gone right after commit
    dumped, _ = incremental(engine)
    monkeypatch.undo()
    here = partition_dir(target)
    assert repl_status(target, "sales_dr") == dumped.last_event_id
    assert not (here / "part-new.parquet").exists(), "published before its intent ran"
    assert [p.name for p in staged_copies(here)] == [".hmsrepl-staging-part-new.parquet"]
    assert replica_leftovers(target, "sales_dr") == [], "a copy a committed load owes is not a leftover"
    assert target.complete_file_intents(lease_seconds=0).completed == 1  # what a restart does
    assert (here / "part-new.parquet").read_bytes() == b"new rows" and staged_copies(here) == []
    assert verify(source, "sales", target, "sales_dr") == []
    append(source, "part-next.parquet", b"next rows")  # and replication goes on from there
    incremental(engine)
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_failed_batch_leaves_no_staged_copy_and_changes_nothing(engine, source, target, monkeypatch):
    seed(source)
    bootstrap(engine)
    append(source, "part-new.parquet", b"new rows")
    last = repl_status(target, "sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    before = capture_state(target, "sales_dr")
    staged: list[str] = []
    real = VersionPublisher._publish_in_place

    def spy(self: VersionPublisher, *args):  # type: ignore[no-untyped-def]
        published = real(self, *args)
        staged.extend(published.files if published is not None else ())
        return published

    def full_disk(self: TargetWriter, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")  # the batch fails after its file was staged

    monkeypatch.setattr(VersionPublisher, "_publish_in_place", spy)
    monkeypatch.setattr(TargetWriter, "set_last_id", full_disk)
    with pytest.raises(Exception, match="no space left on the target file system"):
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert staged == ["part-new.parquet"], "the batch failed before the file was staged"
    assert diff_states(before, capture_state(target, "sales_dr")) == []
    assert repl_status(target, "sales_dr") == last
    assert staged_copies(Path(local_path(target.config.warehouse))) == []
    assert target.catalog.intents.pending() == []
    monkeypatch.undo()
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")  # the cause fixed, it loads
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_reader_between_the_commit_and_the_rename_sees_the_state_before(
    engine: ReplicationEngine, source: Metastore, target: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(source)
    bootstrap(engine)
    append(source, "part-new.parquet", b"new rows")
    seen: list[list[str]] = []
    real = FileIntents._after_commit

    def reader_first(self: FileIntents, intent) -> None:  # type: ignore[no-untyped-def]
        seen.append(sorted(p.name for p in partition_dir(target).iterdir() if not p.name.startswith(".")))
        real(self, intent)

    monkeypatch.setattr(FileIntents, "_after_commit", reader_first)
    incremental(engine)
    assert seen == [[f"part-{i:05d}.parquet" for i in range(FILES)]], "the file was visible before its rename"
    assert (partition_dir(target) / "part-new.parquet").exists()


@pytest.mark.parametrize("tamper", ["stray file written", "file deleted"])
def test_files_added_or_removed_behind_the_replicas_back_take_a_new_version(engine, source, target, tamper):
    """A writer refused by the replica's metastore may still have left its file (or removed one): the next
    load of the object does not add to that directory but makes a version holding exactly the listing."""
    seed(source)
    bootstrap(engine)
    before = partition_dir(target)
    if tamper == "stray file written":
        (before / "part-stray.parquet").write_bytes(b"refused write")
    else:
        (before / "part-00003.parquet").unlink()
    append(source, "part-new.parquet", b"new rows")
    incremental(engine)
    assert partition_dir(target) != before
    assert verify(source, "sales", target, "sales_dr") == []


def seed_two_days(source: Metastore) -> None:
    """``seed`` and a second partition ``d2`` holding files too (yesterday's and today's hour, say)."""
    seed(source)
    orders = source.catalog.get_table("sales", "orders")
    [part] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d2")])
    for i in range(5):
        write_file(part.sd.location or "", f"part-{i:05d}.parquet", f"d2 rows {i}".encode())
    source.catalog.insert("sales", "orders", ["d2"])


def day_dir(target: Metastore, day: str) -> Path:
    return Path(local_path(target.catalog.get_partition("sales_dr", "orders", [day]).sd.location or ""))


def test_appends_to_two_partitions_in_one_batch_are_added_in_place_in_the_order_written(
    engine, source, target, monkeypatch
):
    """A batch that appends to one partition, then to the next (a writer crossing into the next hour): both
    are added in place, their files renamed after the commit in the order the source wrote them, so a reader
    sees the source's states one after the other."""
    seed_two_days(source)
    bootstrap(engine)
    before = {day: day_dir(target, day) for day in ("d1", "d2")}
    for day, name in (("d1", "a1.parquet"), ("d1", "a2.parquet"), ("d2", "b1.parquet"), ("d2", "b2.parquet")):
        append(source, name, name.encode(), day=day)
    order = published_in_order(monkeypatch)
    _, loaded = incremental(engine)
    assert {day: day_dir(target, day) for day in before} == before, "a partition took a new version"
    assert order == [["a1.parquet", "a2.parquet", "b1.parquet", "b2.parquet"]]
    assert loaded.stats.files_copied == 4
    assert all(staged_copies(d) == [] for d in before.values()) and target.catalog.intents.pending() == []
    assert verify(source, "sales", target, "sales_dr") == []


def test_appends_to_two_partitions_in_turns_are_renamed_in_the_order_written(
    engine, source, target, monkeypatch
):
    """A B A B (a streaming job writing one file per partition per micro-batch): renamed partition by
    partition, a reader would see A's second file before B's first, an order the source never had. The
    files are renamed in the order the source wrote them, across the partitions."""
    seed_two_days(source)
    bootstrap(engine)
    before = {day: day_dir(target, day) for day in ("d1", "d2")}
    writes = (("d1", "a1.parquet"), ("d2", "b1.parquet"), ("d1", "a2.parquet"), ("d2", "b2.parquet"))
    for day, name in writes:
        append(source, name, name.encode(), day=day)
    order = published_in_order(monkeypatch)
    incremental(engine)
    assert {day: day_dir(target, day) for day in before} == before, "a partition took a new version"
    assert order == [[name for _, name in writes]]
    assert verify(source, "sales", target, "sales_dr") == []


def test_when_one_partition_cannot_be_added_in_place_neither_is(engine, source, target):
    """d2 holds a file written behind the replica's back, so it takes a new version (switched at the
    commit); d1's append, written first, must then not appear after it: it takes a new version too."""
    seed_two_days(source)
    bootstrap(engine)
    before = {day: day_dir(target, day) for day in ("d1", "d2")}
    (before["d2"] / "part-stray.parquet").write_bytes(b"refused write")
    append(source, "a1.parquet", b"a1", day="d1")
    append(source, "b1.parquet", b"b1", day="d2")
    incremental(engine)
    assert all(day_dir(target, day) != before[day] for day in before)
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_load_of_appends_to_two_partitions_that_dies_after_its_commit_publishes_them_on_restart(
    engine, source, target, monkeypatch
):
    seed_two_days(source)
    bootstrap(engine)
    append(source, "a1.parquet", b"a1", day="d1")
    append(source, "b1.parquet", b"b1", day="d2")
    monkeypatch.setattr(FileIntents, "_after_commit", lambda self, intent: None)  # gone right after commit
    incremental(engine)
    monkeypatch.undo()
    dirs = {day: day_dir(target, day) for day in ("d1", "d2")}
    assert [p.name for d in dirs.values() for p in staged_copies(d)] == [
        ".hmsrepl-staging-a1.parquet",
        ".hmsrepl-staging-b1.parquet",
    ]
    assert target.complete_file_intents(lease_seconds=0).completed == 1  # what a restart does
    assert all(staged_copies(d) == [] for d in dirs.values())
    assert verify(source, "sales", target, "sales_dr") == []
    append(source, "a2.parquet", b"a2", day="d1")  # and replication goes on from there, in place again
    append(source, "b2.parquet", b"b2", day="d2")
    incremental(engine)
    assert {day: day_dir(target, day) for day in dirs} == dirs
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_file_touched_on_the_source_does_not_stop_the_next_append_going_in_place(engine, source, target):
    """A touched file (new time, same bytes) is not logged again, so the replica neither copies it nor takes
    a new version for it."""
    seed(source)
    bootstrap(engine)
    before = partition_dir(target)
    part = source.catalog.get_partition("sales", "orders", ["d1"])
    os.utime(
        Path(local_path(part.sd.location or "")) / "part-00003.parquet", ns=(0, 1_000_000_000_000_000_000)
    )
    source.catalog.alter_partitions("sales", "orders", [part])  # a full capture (e.g. a statistics update)
    append(source, "part-new.parquet", b"new rows")
    _, loaded = incremental(engine)
    assert partition_dir(target) == before and loaded.stats.files_copied == 1
    assert verify(source, "sales", target, "sales_dr") == []


def test_an_append_and_a_drop_of_another_partition_commit_apart_and_the_append_goes_in_place(
    engine, source, target, monkeypatch
):
    """The drop shows at its commit, a file added in place only after it: in one transaction a reader would
    see d2 gone and d1 without its new file, a state the source never had (it appended first). The load
    commits the append first, in place, then the drop."""
    seed_two_days(source)
    bootstrap(engine)
    before = day_dir(target, "d1")
    append(source, "a1.parquet", b"a1", day="d1")
    source.catalog.drop_partitions("sales", "orders", [["d2"]])
    seen = states_at_commits(target, monkeypatch)
    incremental(engine)
    assert day_dir(target, "d1") == before, "d1 took a new version"
    assert seen == [(["d1", "d2"], [])]  # the append's commit, d2 still there
    assert verify(source, "sales", target, "sales_dr") == []


def test_an_hour_rollover_in_one_load_appends_in_place_to_the_hour_it_leaves(
    engine, source, target, monkeypatch
):
    """Appends to d1, d3 added with its first file, then appends to both (late rows for d1): d1 keeps its
    directory and takes its files in place; d3 appears at its own commit, after d1's earlier file."""
    seed(source)
    bootstrap(engine)
    before = day_dir(target, "d1")
    append(source, "a1.parquet", b"a1")
    orders = source.catalog.get_table("sales", "orders")
    write_file(f"{(orders.sd.location or '').rstrip('/')}/day=d3", "c0.parquet", b"c0")  # Spark: data first
    source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d3")])
    append(source, "a2.parquet", b"a2")
    append(source, "c1.parquet", b"c1", day="d3")
    seen = states_at_commits(target, monkeypatch)
    order = published_in_order(monkeypatch)
    _, loaded = incremental(engine)
    assert day_dir(target, "d1") == before, "the hour left behind took a new version"
    assert order == [["a1.parquet"], ["a2.parquet", "c1.parquet"]]
    # a1's commit, then d3's (a1 renamed before it) and a2's and c1's (a2 still staged). d3's commit leaves
    # file work behind only when its directory is made after it, so it is seen once or twice: the states
    # in order, each once.
    assert [state for number, state in enumerate(seen) if state not in seen[:number]] == [
        (["d1"], []),
        (["d1", "d3"], ["a1.parquet"]),
    ]
    assert len(seen) in (2, 3)
    assert loaded.stats.files_copied == 4
    assert verify(source, "sales", target, "sales_dr") == []


def states_at_commits(
    target: Metastore, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[list[str], list[str]]]:
    """What a reader of the replica sees at each commit that leaves file work behind, before that work:
    the partitions, and the files appended to d1 (``a*``) that are in place."""
    seen: list[tuple[list[str], list[str]]] = []
    real = FileIntents._after_commit

    def spy(self: FileIntents, intents) -> None:  # type: ignore[no-untyped-def]
        names = sorted(p.values[0] for p in target.catalog.get_partitions("sales_dr", "orders"))
        seen.append((names, sorted(p.name for p in day_dir(target, "d1").glob("a*"))))
        real(self, intents)

    monkeypatch.setattr(FileIntents, "_after_commit", spy)
    return seen


def test_an_acid_transaction_between_two_partitions_appends_leaves_them_in_place(
    engine, source, target, monkeypatch
):
    """Transactions of an ACID table in the same database (events without a table of their own) do not
    touch a plain table's partitions: appends to two of them around an ACID write still go in place."""
    seed_two_days(source)
    source.catalog.create_table(
        make_table("sales", "ledger", transactional="true", transactional_properties="insert_only")
    )
    bootstrap(engine)
    before = {day: day_dir(target, day) for day in ("d1", "d2")}
    append(source, "a1.parquet", b"a1", day="d1")
    writer = InsertOnlyWriter(source, "sales", "ledger", None, heartbeat=False).begin()
    write_file(writer.target_uri, "part-0.txt", b"ledger rows")
    writer.commit()
    append(source, "b1.parquet", b"b1", day="d2")
    order = published_in_order(monkeypatch)
    incremental(engine)
    assert {day: day_dir(target, day) for day in before} == before, "a partition took a new version"
    assert order == [["a1.parquet", "b1.parquet"]]  # one batch: the transaction cut nothing
    assert visible_files(target, "sales_dr", "ledger", None) != []
    assert verify(source, "sales", target, "sales_dr") == []


def test_appends_to_two_partitions_around_a_database_change_go_in_place_in_batches_of_their_own(
    engine, source, target, monkeypatch
):
    """A database event shows at its commit (a replica's own log holds one per load, read by the next
    replica in a chain): the appends before it commit first, those after it next, all in place."""
    seed_two_days(source)
    bootstrap(engine)
    before = {day: day_dir(target, day) for day in ("d1", "d2")}
    append(source, "a1.parquet", b"a1", day="d1")
    append(source, "b1.parquet", b"b1", day="d2")
    sales = source.catalog.get_database("sales")
    source.catalog.alter_database("sales", sales.model_copy(update={"parameters": {"owner_team": "ops"}}))
    append(source, "a2.parquet", b"a2", day="d1")
    append(source, "b2.parquet", b"b2", day="d2")
    order = published_in_order(monkeypatch)
    incremental(engine)
    assert {day: day_dir(target, day) for day in before} == before, "a partition took a new version"
    assert order == [["a1.parquet", "b1.parquet"], ["a2.parquet", "b2.parquet"]]
    assert target.catalog.get_database("sales_dr").parameters.get("owner_team") == "ops"
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_function_created_between_two_partitions_appends_leaves_them_in_place(
    engine, source, target, monkeypatch
):
    """A function touches no table: it neither splits the table's run nor cuts the batch; the appends go in
    place together."""
    seed_two_days(source)
    bootstrap(engine)
    before = {day: day_dir(target, day) for day in ("d1", "d2")}
    append(source, "a1.parquet", b"a1", day="d1")
    source.catalog.create_function(Function(function_name="f", db_name="sales", class_name="com.example.F"))
    append(source, "b1.parquet", b"b1", day="d2")
    order = published_in_order(monkeypatch)
    incremental(engine)
    assert {day: day_dir(target, day) for day in before} == before, "a partition took a new version"
    assert order == [["a1.parquet", "b1.parquet"]]
    assert target.catalog.get_function("sales_dr", "f").class_name == "com.example.F"
    assert verify(source, "sales", target, "sales_dr") == []
