"""Every commit of a load publishes a position whose whole state is the source's there, compaction or not.

A short window that a load applies in two transactions (a table's one-file appends in place first, then
the partition added after them) while compaction left out a table created and dropped around that cut: the
first commit must not publish a position at which the source had that table (holds.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.metastore.model import Database
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from tests.helpers import make_partition, make_table, open_store, write_file
from tests.replica_states import CommitLog, History, states

NAMES = ("t0", "t1")
NO_COMPACTION = " WITH ('hmsrepl.repl.compact.events'='false')"


@pytest.mark.parametrize("options", ["", NO_COMPACTION], ids=["compacted", "full"])
def test_no_commit_shows_a_table_missing_that_the_source_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: str
) -> None:
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    catalog = source.catalog
    catalog.create_database(Database(name="c"))
    t0 = catalog.create_table(make_table("c", "t0", partition_keys=("p",)))
    [a] = catalog.add_partitions("c", "t0", [make_partition(t0, "a")])
    catalog.insert("c", "t0", ["a"], new_files=[write_file(a.sd.location, "f0", b"first file")])
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    engine.execute(f"REPL LOAD c_dr FROM '{engine.execute('REPL DUMP c').dump_dir}'")
    history = History(source, "c", NAMES)
    record = history.record
    record()
    start = source.events.current_event_id()
    catalog.create_table(make_table("c", "t1"))  # left out by compaction, with its drop
    record()
    appended = write_file(a.sd.location, "f1", b"one file")  # an append the load adds in place...
    catalog.insert("c", "t0", ["a"], new_files=[appended])
    record()
    [b] = catalog.add_partitions("c", "t0", [make_partition(t0, "b")])  # ...then a reshape: a cut
    record()
    catalog.drop_table("c", "t1")
    record()
    catalog.insert("c", "t0", ["b"], new_files=[write_file(b.sd.location, "f2", b"another file")])
    record()
    catalog.insert("c", "t0", ["a"], new_files=[write_file(a.sd.location, "f3", b"one more")])
    record()
    assert sorted(history.recorded) == list(range(start, start + 7)), "one event per step"

    dumped = engine.execute(f"REPL DUMP c FROM {start}{options}")
    meta = DumpDir(dumped.dump_dir).read_metadata()
    assert meta.skipped_events == (0 if options else 2)
    # From t1's creation until its drop the compacted replica is not the source: no commit there.
    assert meta.holds == ([] if options else [[start + 1, start + 4]])
    with CommitLog(target, "c_dr", NAMES).watching(monkeypatch) as commits:
        engine.execute(f"REPL LOAD c_dr FROM '{dumped.dump_dir}'")
    assert commits.seen, "the load committed nothing"
    assert commits.foreign(history) == []
    assert repl_status(target, "c_dr") == start + 6
    assert states(target, "c_dr", NAMES) == history.at(start + 6)
    source.close()
    target.close()


def test_a_name_reused_while_a_renamed_in_table_waits_commits_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x0 (outside the policy) renamed to t1, then t0 dropped and created again: the load would commit the
    drop before t0's name is reused, a position where the source had t1 and the replica not yet (t1 is
    bootstrapped at the window's end). It applies both in the transaction that ends the window instead."""
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    catalog = source.catalog
    catalog.create_database(Database(name="c"))
    t0 = catalog.create_table(make_table("c", "t0"))
    catalog.insert("c", "t0", new_files=[write_file(t0.sd.location, "old", b"old rows")])
    x0 = catalog.create_table(make_table("c", "x0"))
    catalog.insert("c", "x0", new_files=[write_file(x0.sd.location, "x", b"x rows")])
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    policy = "c.['t[0-9]+']"
    engine.execute(f"REPL LOAD c_dr FROM '{engine.execute(f'REPL DUMP {policy}').dump_dir}'")
    history = History(source, "c", NAMES)
    history.record()
    start = source.events.current_event_id()
    catalog.alter_table("c", "x0", catalog.get_table("c", "x0").model_copy(update={"table_name": "t1"}))
    history.record()
    catalog.drop_table("c", "t0")
    history.record()
    t0 = catalog.create_table(make_table("c", "t0"))
    history.record()
    catalog.insert("c", "t0", new_files=[write_file(t0.sd.location, "new", b"new rows")])
    history.record()

    dumped = engine.execute(f"REPL DUMP {policy} FROM {start}")
    assert DumpDir(dumped.dump_dir).read_metadata().bootstrapped_tables == ["t1"]
    with CommitLog(target, "c_dr", NAMES).watching(monkeypatch) as commits:
        engine.execute(f"REPL LOAD c_dr FROM '{dumped.dump_dir}'")
    assert commits.foreign(history) == []
    assert repl_status(target, "c_dr") == dumped.last_event_id
    assert states(target, "c_dr", NAMES) == history.at(dumped.last_event_id)
    assert verify(source, "c", target, "c_dr", parse_policy(policy)) == []
    source.close()
    target.close()
