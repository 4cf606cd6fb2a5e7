"""A load does not sleep out the readers' grace period: replaced versions retire later, once it has passed,
at the next load, ``repl cleanup``, a command touching the replica, or the serving metastore's housekeeping."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.leftovers import RETIRE_GRACE_ENV, RETIRING_DIR
from hmsrepl.replication.verify import replica_leftovers
from hmsrepl.thrift.server import MetastoreServer
from tests.helpers import make_table, open_store, side_args

GRACE = 2.0


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@dataclass
class Replaced:
    """A replica ``d`` whose last load replaced the first version of table ``t`` (awaiting its grace)."""

    source: Metastore
    target: Metastore
    engine: ReplicationEngine
    first_version: str
    tickets: Path
    incremental_dump: str


@pytest.fixture
def replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Replaced]:
    monkeypatch.setenv(RETIRE_GRACE_ENV, str(GRACE))
    source, target = open_store(tmp_path, "src"), open_store(tmp_path, "dst")
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    source.catalog.create_database(Database(name="d"))
    table = source.catalog.create_table(make_table("d", "t"))
    location = Path(table.sd.location or "")
    _write(location / "a.txt", b"first")
    source.catalog.insert("d", "t")
    boot = engine.execute("REPL DUMP d")
    engine.execute(f"REPL LOAD d FROM '{boot.dump_dir}'")
    first_version = target.catalog.get_table("d", "t").sd.location or ""
    _write(location / "b.txt", b"second")
    # An overwrite takes a new version (a lone added file would be published in place, replacing nothing).
    source.catalog.insert("d", "t", new_files=[str(location / "b.txt")], replace=True)
    inc = engine.execute(f"REPL DUMP d FROM {boot.last_event_id}")
    started = time.monotonic()
    engine.execute(f"REPL LOAD d FROM '{inc.dump_dir}'")
    assert time.monotonic() - started < GRACE, "the load waited for the grace period"
    assert first_version and os.path.isdir(first_version), "replaced version removed before its grace ran out"
    tickets = Path(target.catalog.default_db_location("d")) / RETIRING_DIR
    assert list(tickets.iterdir()), "no retirement was deferred"
    yield Replaced(source, target, engine, first_version, tickets, inc.dump_dir)
    source.close()
    target.close()


def _assert_retired(replaced: Replaced) -> None:
    assert not os.path.exists(replaced.first_version)
    assert not replaced.tickets.exists()
    assert replica_leftovers(replaced.target, "d") == []


def test_replaced_versions_wait_in_tickets_and_retire_at_the_next_load(replaced: Replaced) -> None:
    assert replica_leftovers(replaced.target, "d") == [], "a version awaiting its grace is not a leftover"
    time.sleep(GRACE + 0.1)
    replaced.engine.execute(
        f"REPL LOAD d FROM '{replaced.incremental_dump}'"
    )  # nothing new; retires what is due
    _assert_retired(replaced)


def test_cleanup_reports_the_versions_it_retired(replaced: Replaced) -> None:
    runner = CliRunner()
    cleanup = ["repl", "cleanup", "d", *side_args("target", replaced.target)]
    early = runner.invoke(main, cleanup)
    assert early.exit_code == 0, early.output
    assert early.output.startswith("retired 0 replaced version directories (0 files)")
    assert os.path.isdir(replaced.first_version), "cleanup retired a version before its grace ran out"
    time.sleep(GRACE + 0.1)
    done = runner.invoke(main, cleanup)
    assert done.exit_code == 0, done.output
    assert done.output.startswith("retired 1 replaced version directories (1 files); removed 0 other files")
    _assert_retired(replaced)


@pytest.mark.parametrize(
    "command",
    [
        ["repl", "run", "REPL STATUS d"],
        ["repl", "verify", "d", "d"],
        ["repl", "lag", "d", "d"],
    ],
    ids=["status", "verify", "lag"],
)
def test_a_command_touching_the_replica_retires_what_is_due(replaced: Replaced, command: list[str]) -> None:
    sides = [*side_args("target", replaced.target)]
    if command[1] != "run":
        sides += side_args("source", replaced.source)
    time.sleep(GRACE + 0.1)
    done = CliRunner().invoke(main, [*command, *sides])
    assert done.exit_code == 0, done.output
    _assert_retired(replaced)


def test_a_command_without_the_replicas_roots_leaves_retirement_alone(replaced: Replaced) -> None:
    """Retiring recycles into the replica's cmroot: a status run without it must not guess one."""
    time.sleep(GRACE + 0.1)
    done = CliRunner().invoke(
        main, ["repl", "run", "REPL STATUS d", "--target-db-url", replaced.target.config.db_url]
    )
    assert done.exit_code == 0, done.output
    assert os.path.isdir(replaced.first_version)


def test_the_servers_housekeeping_retires_what_is_due(replaced: Replaced) -> None:
    """No load, no command: the metastore serving the replica retires once the grace period has passed."""
    housekeeper = MetastoreServer(Metastore(replaced.target.config), port=0)
    thread = threading.Thread(target=housekeeper.housekeeping, args=(0.2,), daemon=True)
    thread.start()
    try:
        time.sleep(0.5)  # a few passes, well inside the grace period
        assert os.path.isdir(replaced.first_version), "housekeeping retired a version before its grace"
        deadline = time.monotonic() + 30
        while os.path.exists(replaced.first_version) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        housekeeper.stop()
        thread.join(10)
        housekeeper.store.close()
    _assert_retired(replaced)


def test_housekeeping_finds_exactly_the_replica_databases(metastore: Metastore) -> None:
    """The pass reads only databases marked as replicas, on every backend (a text match, then the JSON)."""
    from hmsrepl.metastore.protection import REPLICA_OF, privileged
    from hmsrepl.replication.leftovers import replica_databases

    metastore.catalog.create_database(Database(name="plain"))
    metastore.catalog.create_database(Database(name="mention", description=f"not a {REPLICA_OF} at all"))
    with privileged("replication load"):  # as a bootstrap load creates them
        metastore.catalog.create_database(Database(name="dr_b", parameters={REPLICA_OF: "b"}))
        metastore.catalog.create_database(Database(name="dr_a", parameters={REPLICA_OF: "a"}))
    assert replica_databases(metastore) == ["dr_a", "dr_b"]
