"""``hmsrepl repl verify`` checks the replicas the product makes: table-level policy replicas, metadata-only
replicas, and what loads leave behind in a replica's external tables' directories.

Each replica verifies equal (exit 0) when it is, and a planted difference makes it exit 1, naming it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hmsrepl.cli import main
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Table, TableType
from hmsrepl.metastore.protection import privileged
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.replica_scope import METADATA_ONLY, POLICY
from hmsrepl.replication.source_roots import SourceRoots
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, make_table, side_args, write_file

METADATA_ONLY_DUMP = " WITH ('hive.repl.dump.metadata.only'='true')"


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Metastore]:
    """A source whose database ``sales`` holds external tables e1 (partitioned) and e2, and managed m1."""
    (tmp_path / "ext").mkdir()
    store = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/source.db",
            warehouse=str(tmp_path / "src_wh"),
            cmroot=str(tmp_path / "src_cm"),
            external_roots=[str(tmp_path / "ext")],
        )
    )
    catalog = store.catalog
    catalog.create_database(Database(name="sales"))
    e1 = catalog.create_table(
        _external(make_table("sales", "e1", partition_keys=("d",)), tmp_path / "ext/e1")
    )
    for part in catalog.add_partitions("sales", "e1", [make_partition(e1, "0"), make_partition(e1, "1")]):
        write_file(part.sd.location or "", "f.csv", f"rows of d={part.values[0]}".encode())
        catalog.insert("sales", "e1", part.values)
    catalog.create_table(_external(make_table("sales", "e2"), tmp_path / "ext/e2"))
    write_file(str(tmp_path / "ext/e2"), "a.csv", b"e2 rows")
    catalog.insert("sales", "e2")
    m1 = catalog.create_table(make_table("sales", "m1"))
    write_file(m1.sd.location or "", "m.csv", b"managed rows")
    catalog.insert("sales", "m1")
    yield store
    store.close()


def _external(table: Table, location: Path) -> Table:
    sd = table.sd.model_copy(update={"location": str(location)})
    return table.model_copy(
        update={"table_type": TableType.EXTERNAL_TABLE, "sd": sd, "parameters": {"EXTERNAL": "TRUE"}}
    )


@pytest.fixture
def engine(source: Metastore, target: Metastore, tmp_path: Path) -> ReplicationEngine:
    roots = SourceRoots(source.config.warehouse, source.config.cmroot, (str(tmp_path / "ext"),))
    return ReplicationEngine(str(tmp_path / "dumps"), source, target, source_roots=roots)


def _replicate(engine: ReplicationEngine, policy: str, settings: str = "") -> None:
    """A bootstrap and, after a change at the source (an append to e2), an incremental dump and load."""
    first = engine.execute(f"REPL DUMP {policy}{settings}")
    engine.execute(f"REPL LOAD sales_dr FROM '{first.dump_dir}'")
    assert engine.source is not None
    catalog = engine.source.catalog
    write_file(catalog.get_table("sales", "e2").sd.location or "", "b.csv", b"more e2 rows")
    catalog.insert("sales", "e2")
    second = engine.execute(f"REPL DUMP {policy} FROM {first.last_event_id}{settings}")
    engine.execute(f"REPL LOAD sales_dr FROM '{second.dump_dir}'")


def _verify_cli(source: Metastore, target: Metastore, *options: str) -> Result:
    args = [
        "repl",
        "verify",
        "sales",
        "sales_dr",
        *options,
        *side_args("source", source),
        *side_args("target", target),
    ]
    # The source metastore's external root, as its own settings name it: verify reads files only below the
    # roots the command's settings give the metastore.
    return CliRunner().invoke(
        main, args, env={"HMSREPL_EXTERNAL_ROOTS": json.dumps(source.config.external_roots)}
    )


def _replica_dir(target: Metastore, table: str) -> Path:
    return Path(local_path(target.catalog.get_table("sales_dr", table).sd.location or ""))


def test_policy_replica_verifies_with_its_recorded_policy(engine, source, target) -> None:
    _replicate(engine, "sales.'e1|e2'")  # Hive's form
    assert target.catalog.get_database("sales_dr").parameters[POLICY] == "sales.['e1|e2']"
    assert sorted(target.catalog.get_tables("sales_dr")) == ["e1", "e2"]

    recorded = _verify_cli(source, target)
    assert recorded.exit_code == 0, recorded.output
    assert "sales_dr equals sales: metadata and file checksums match" in recorded.stdout
    assert "policy sales.['e1|e2'] (recorded by the replica's loads)" in recorded.stderr
    given = _verify_cli(source, target, "--policy", "sales.['e.*']")
    assert given.exit_code == 0 and "(given)" in given.stderr, given.output

    whole = _verify_cli(source, target, "--policy", "sales")  # the whole database: m1 is not replicated
    assert whole.exit_code == 1 and whole.stdout.splitlines() == ["table m1 is missing on the replica"]

    (_replica_dir(target, "e2") / "planted.csv").write_bytes(b"not the source's")
    planted = _verify_cli(source, target)
    assert planted.exit_code == 1
    assert planted.stdout.splitlines() == [
        "table e2: files differ (missing [], extra ['planted.csv'], checksum [])"
    ]


def test_a_table_outside_the_policy_on_the_replica_is_a_difference(engine, source, target) -> None:
    _replicate(engine, "sales.'e.*'")
    with privileged("a test plants a table the policy does not replicate"):
        target.catalog.create_table(make_table("sales_dr", "m1"))
    planted = _verify_cli(source, target)
    assert planted.exit_code == 1 and planted.stdout.splitlines() == ["table m1 exists only on the replica"]


@pytest.mark.parametrize(
    ("policy", "fragment"),
    [
        ("sales.[e1|e2]", "enclosed within single or double quotes (Hive error 20021); write sales.'e1|e2'"),
        ("crm.'e1'", "--policy crm.'e1' is a policy of database 'crm', not of 'sales'"),
        ("sales.'e1'.", "cannot parse replication policy (it ends early)"),
    ],
)
def test_a_bad_policy_is_refused_in_one_line(engine, source, target, policy: str, fragment: str) -> None:
    _replicate(engine, "sales")
    refused = _verify_cli(source, target, "--policy", policy)
    assert refused.exit_code != 0 and fragment in refused.stderr, refused.output
    assert "Traceback" not in refused.output and len(refused.stderr.strip().splitlines()) == 1


def test_metadata_only_replica_verifies_its_metadata_and_says_so(engine, source, target) -> None:
    _replicate(engine, "sales", METADATA_ONLY_DUMP)
    assert target.catalog.get_database("sales_dr").parameters[METADATA_ONLY] == "true"

    verified = _verify_cli(source, target)
    assert verified.exit_code == 0, verified.output
    assert "sales_dr equals sales: metadata matches (data files not compared)" in verified.stdout
    assert "metadata only, data files not compared (the replica was loaded from a metadata-only dump)" in (
        verified.stderr
    )
    with_data = _verify_cli(source, target, "--with-data")
    assert with_data.exit_code == 1 and "table m1: files differ (missing ['m.csv']" in with_data.stdout

    m1 = source.catalog.get_table("sales", "m1")  # a change the replica has not loaded
    source.catalog.alter_table("sales", "m1", m1.model_copy(update={"parameters": {"comment": "changed"}}))
    planted = _verify_cli(source, target)
    assert planted.exit_code == 1 and planted.stdout.splitlines() == [
        "table m1: metadata differs in ['parameters']"
    ]


def test_a_bootstrap_with_data_ends_the_metadata_only_mark(engine, source, target) -> None:
    _replicate(engine, "sales", METADATA_ONLY_DUMP)
    e2 = source.catalog.get_table("sales", "e2").sd.location or ""
    write_file(e2, "c.csv", b"newer rows")
    source.catalog.insert("sales", "e2")  # a bootstrap load acts only when the source moved on
    bootstrap = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{bootstrap.dump_dir}'")
    assert METADATA_ONLY not in target.catalog.get_database("sales_dr").parameters
    assert verify(source, "sales", target, "sales_dr") == []


def test_leftovers_under_the_external_directories_are_reported(engine, source, target) -> None:
    _replicate(engine, "sales")
    assert verify(source, "sales", target, "sales_dr") == []
    e1, e2 = _replica_dir(target, "e1"), _replica_dir(target, "e2")
    assert not e1.is_relative_to(local_path(target.catalog.get_database("sales_dr").location_uri or ""))
    dropped = e1 / "d=9.hmsrepl-v99"  # a dropped partition's version, inside the container
    write_file(str(dropped), "f.csv", b"old rows")
    old = e2.parent / "e2.hmsrepl-v3"  # an old version of e2, beside it
    write_file(str(old), "a.csv", b"old rows")

    leftovers = sorted(line for line in verify(source, "sales", target, "sales_dr"))
    assert leftovers == sorted(f"leftover on the replica: {d}/" for d in (dropped, old))
    cli = _verify_cli(source, target)
    assert cli.exit_code == 1 and f"leftover on the replica: {dropped}/" in cli.stdout


def test_a_dropped_tables_directory_in_the_replicas_own_external_root_is_a_leftover(
    engine, source, target
) -> None:
    from hmsrepl.replication.replica_layout import owned_external_root

    _replicate(engine, "sales")
    own = owned_external_root(target, "sales_dr")
    assert own is not None and _replica_dir(target, "e2").is_relative_to(local_path(own))
    gone = _replica_dir(target, "e2").parent / "e9"  # no object of the replica is named e9
    write_file(str(gone), "a.csv", b"rows of a dropped table")
    assert verify(source, "sales", target, "sales_dr") == [f"leftover on the replica: {gone}/"]


def test_directories_awaiting_retirement_are_not_leftovers(engine, source, target, monkeypatch) -> None:
    monkeypatch.setenv("HMSREPL_REPL_RETIRE_GRACE_SECONDS", "3600")
    _replicate(engine, "sales")
    e2 = source.catalog.get_table("sales", "e2")
    last = int(target.catalog.get_database("sales_dr").parameters["repl.last.id"])
    new = write_file(e2.sd.location or "", "c.csv", b"overwritten rows")
    source.catalog.insert("sales", "e2", new_files=[new], replace=True)  # INSERT OVERWRITE: a new version
    before = _replica_dir(target, "e2")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert _replica_dir(target, "e2") != before and os.path.isdir(
        before
    )  # the old one awaits its grace period
    assert verify(source, "sales", target, "sales_dr") == []
