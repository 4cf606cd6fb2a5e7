"""Policy REPLACE and renames across a policy's table filter, end to end on every target backend.

Tables a new policy includes are bootstrapped inside the incremental dump (as of its last event id), tables
it no longer includes are dropped on load, a rename into the policy bootstraps the table and a rename out of
it drops it; loads stay idempotent and the next ordinary incremental follows the new policy.
"""

from __future__ import annotations

import os

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.commands import CommandError, DumpCommand, parse_command, parse_policy
from hmsrepl.replication.dump import DumpEngine
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import LoadEngine, repl_status
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.verify import capture_state, diff_states, verify
from tests.dump_events import read_events
from tests.helpers import make_partition, make_table, write_file

OLD = "sales.['orders', 'plain']"
NEW = "sales.['orders', 'audit']"


def partitioned(store: Metastore, name: str, days: tuple[str, ...]) -> None:
    table = store.catalog.create_table(make_table("sales", name, partition_keys=("day",)))
    for day in days:
        [part] = store.catalog.add_partitions("sales", name, [make_partition(table, day)])
        write_file(part.sd.location, f"{day}.parquet", f"{name} rows of {day}".encode())
        store.catalog.insert("sales", name, [day])


def unpartitioned(store: Metastore, name: str, data: bytes) -> None:
    table = store.catalog.create_table(make_table("sales", name))
    write_file(table.sd.location, "000000_0", data)
    store.catalog.insert("sales", name)


def load(engine: ReplicationEngine, dump_dir: str):
    return engine.execute(f"REPL LOAD sales_dr FROM '{dump_dir}'")


def dumped_event_tables(dump_dir: str) -> set[str]:
    return {doc["table"] for doc in read_events(dump_dir)}


def test_replace_bootstraps_new_tables_drops_old_ones_and_the_next_incremental_follows(
    engine, source, target
) -> None:
    source.catalog.create_database(Database(name="sales"))
    partitioned(source, "orders", ("d1", "d2"))
    unpartitioned(source, "plain", b"plain v1")
    partitioned(source, "audit", ("d1",))
    load(engine, engine.execute(f"REPL DUMP {OLD}").dump_dir)
    assert sorted(target.catalog.get_tables("sales_dr")) == ["orders", "plain"]
    # While the old policy is in force, audit changes (its events must not be replayed separately) ...
    audit = source.catalog.get_table("sales", "audit")
    [d2] = source.catalog.add_partitions("sales", "audit", [make_partition(audit, "d2")])
    write_file(d2.sd.location, "d2.parquet", b"audit rows of d2")
    source.catalog.insert("sales", "audit", ["d2"])
    source.catalog.drop_partitions("sales", "audit", [["d1"]])
    # ... and so do the tables both policies include.
    d1 = source.catalog.get_partition("sales", "orders", ["d1"])
    new = write_file(d1.sd.location, "d1-v2.parquet", b"orders rows of d1, v2")
    source.catalog.insert("sales", "orders", ["d1"], new_files=[new], replace=True)

    last = repl_status(target, "sales_dr")
    dumped = engine.execute(f"REPL DUMP {NEW} REPLACE {OLD} FROM {last}")
    meta = DumpDir(dumped.dump_dir).read_metadata()
    assert meta.replaced_policy == parse_policy(OLD).to_text() and meta.policy == parse_policy(NEW).to_text()
    assert meta.bootstrapped_tables == ["audit"]
    assert (dumped.tables, dumped.partitions) == (1, 1)  # audit and its one partition left, d2
    assert dumped.files == 2  # orders' new d1 listing (the overwrite event) and audit's d2 file
    assert dumped.last_event_id == source.get_current_notification_event_id()
    assert dumped_event_tables(dumped.dump_dir) == {"orders"}
    # A parallel copier (the Spark load app) is told about the bootstrapped table's files too.
    planned = LoadEngine(target, source_roots=engine.load_source_roots).plan_copies(
        parse_command(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    )
    assert {t.target_uri.rsplit("/", 1)[-1] for t in planned} == {"d1-v2.parquet", "d2.parquet"}
    loaded = load(engine, dumped.dump_dir)
    assert loaded.last_event_id == repl_status(target, "sales_dr") == dumped.last_event_id
    assert sorted(target.catalog.get_tables("sales_dr")) == ["audit", "orders"]
    assert verify(source, "sales", target, "sales_dr", parse_policy(NEW)) == []
    assert target.catalog.get_partition_names("sales_dr", "audit") == ["day=d2"]

    # Loading the same dump again changes nothing: no event, no copy.
    before, state = target.get_current_notification_event_id(), capture_state(target, "sales_dr")
    again = load(engine, dumped.dump_dir)
    assert again.stats.files_copied == 0 and target.get_current_notification_event_id() == before
    assert diff_states(state, capture_state(target, "sales_dr")) == []

    # The next ordinary incremental follows the new policy: audit's changes arrive, plain's do not.
    source.catalog.insert(
        "sales",
        "audit",
        ["d2"],
        new_files=[write_file(d2.sd.location, "more.parquet", b"more audit rows")],
    )
    write_file(source.catalog.get_table("sales", "plain").sd.location, "000001_0", b"plain v2")
    source.catalog.insert("sales", "plain")
    dumped = engine.execute(f"REPL DUMP {NEW} FROM {repl_status(target, 'sales_dr')}")
    assert dumped_event_tables(dumped.dump_dir) == {"audit"}
    load(engine, dumped.dump_dir)
    assert verify(source, "sales", target, "sales_dr", parse_policy(NEW)) == []
    assert "plain" not in target.catalog.get_tables("sales_dr")


def test_renames_into_and_out_of_the_policy(engine, source, target) -> None:
    policy = "sales.['t[0-9]+']"
    source.catalog.create_database(Database(name="sales"))
    unpartitioned(source, "t1", b"t1 rows")
    partitioned(source, "staging", ("d1", "d2"))  # outside the policy
    load(engine, engine.execute(f"REPL DUMP {policy}").dump_dir)
    assert target.catalog.get_tables("sales_dr") == ["t1"]
    catalog = source.catalog
    catalog.alter_table(
        "sales", "staging", catalog.get_table("sales", "staging").model_copy(update={"table_name": "t2"})
    )
    catalog.alter_table(
        "sales", "t1", catalog.get_table("sales", "t1").model_copy(update={"table_name": "old_t1"})
    )
    t2 = catalog.get_table("sales", "t2")
    [d3] = catalog.add_partitions("sales", "t2", [make_partition(t2, "d3")])
    write_file(d3.sd.location, "d3.parquet", b"t2 rows of d3")
    catalog.insert("sales", "t2", ["d3"])
    current = source.get_current_notification_event_id()

    # LIMIT 1 cannot cut a dump that bootstraps a table: it ends where its reads end.
    dumped = engine.execute(f"REPL DUMP {policy} FROM {repl_status(target, 'sales_dr')} LIMIT 1")
    meta = DumpDir(dumped.dump_dir).read_metadata()
    assert meta.bootstrapped_tables == ["t2"] and dumped.last_event_id == current
    written = read_events(dumped.dump_dir)
    assert [(e["event_type"], e["table"]) for e in written] == [("DROP_TABLE", "t1")]  # the rename out
    load(engine, dumped.dump_dir)
    assert target.catalog.get_tables("sales_dr") == ["t2"]
    assert target.catalog.get_partition_names("sales_dr", "t2") == ["day=d1", "day=d2", "day=d3"]
    assert verify(source, "sales", target, "sales_dr", parse_policy(policy)) == []
    copied = os.listdir(target.catalog.get_partition("sales_dr", "t2", ["d3"]).sd.location)
    assert copied == ["d3.parquet"]

    before = target.get_current_notification_event_id()
    assert load(engine, dumped.dump_dir).stats.files_copied == 0
    assert target.get_current_notification_event_id() == before


def test_replace_with_limit_bootstraps_a_newly_included_table_renamed_after_the_cut(
    engine, source, target
) -> None:
    """REPLACE ... LIMIT 1 whose newly included table is renamed after the cut: gone from the source's
    tables now, yet the target never had it; the dump extends to now and bootstraps it under its new name."""
    source.catalog.create_database(Database(name="sales"))
    unpartitioned(source, "orders", b"orders rows")
    unpartitioned(source, "audit", b"audit rows")  # only the new policy includes it
    load(engine, engine.execute(f"REPL DUMP {OLD}").dump_dir)
    catalog = source.catalog
    catalog.drop_table("sales", "orders")
    audit = catalog.get_table("sales", "audit")
    catalog.alter_table("sales", "audit", audit.model_copy(update={"table_name": "orders"}))

    dumped = engine.execute(f"REPL DUMP {NEW} REPLACE {OLD} FROM {repl_status(target, 'sales_dr')} LIMIT 1")
    assert DumpDir(dumped.dump_dir).read_metadata().bootstrapped_tables == ["orders"]
    assert dumped.last_event_id == source.get_current_notification_event_id()
    load(engine, dumped.dump_dir)
    assert target.catalog.get_tables("sales_dr") == ["orders"]
    assert verify(source, "sales", target, "sales_dr", parse_policy(NEW)) == []
    copied = target.catalog.get_table("sales_dr", "orders").sd.location
    assert sorted(os.listdir(copied)) == ["000000_0"]
    with open(os.path.join(copied, "000000_0"), "rb") as handle:
        assert handle.read() == b"audit rows"


def test_replace_refuses_another_database_and_bootstrap_dumps(engine, source, tmp_path) -> None:
    source.catalog.create_database(Database(name="sales"))
    source.catalog.create_database(Database(name="other"))
    with pytest.raises(CommandError, match=r"database 'other'.*'sales'"):
        engine.execute("REPL DUMP sales REPLACE other FROM 0")
    with pytest.raises(CommandError, match="REPLACE needs FROM"):
        engine.execute("REPL DUMP sales REPLACE sales.['t1']")
    # The Python API is checked too, before anything is written.
    command = DumpCommand(ReplicationPolicy("sales"), ReplicationPolicy("other"), from_event_id=0)
    with pytest.raises(CommandError, match=r"database 'other'.*'sales'"):
        DumpEngine(source, str(tmp_path / "dumps")).dump(command)
    assert not (tmp_path / "dumps").exists() or not os.listdir(tmp_path / "dumps")
