"""A load does not sleep out the readers' grace period: replaced versions retire in a later load."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.leftovers import RETIRE_GRACE_ENV, RETIRING_DIR
from hmsrepl.replication.verify import replica_leftovers
from tests.helpers import make_table, open_store


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_replaced_versions_wait_in_tickets_and_retire_when_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RETIRE_GRACE_ENV, "2")
    source, target = open_store(tmp_path, "src"), open_store(tmp_path, "dst")
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    source.catalog.create_database(Database(name="d"))
    table = source.catalog.create_table(make_table("d", "t"))
    location = Path(table.sd.location or "")
    _write(location / "a.txt", b"first")
    source.catalog.insert("d", "t")
    boot = engine.execute("REPL DUMP d")
    engine.execute(f"REPL LOAD d FROM '{boot.dump_dir}'")
    first_version = target.catalog.get_table("d", "t").sd.location
    _write(location / "b.txt", b"second")
    # An overwrite takes a new version (a lone added file would be published in place, replacing nothing).
    source.catalog.insert("d", "t", new_files=[str(location / "b.txt")], replace=True)
    inc = engine.execute(f"REPL DUMP d FROM {boot.last_event_id}")
    started = time.monotonic()
    engine.execute(f"REPL LOAD d FROM '{inc.dump_dir}'")
    assert time.monotonic() - started < 2, "the load waited for the grace period"
    assert first_version and os.path.isdir(first_version), "replaced version removed before its grace ran out"
    tickets = Path(target.catalog.default_db_location("d")) / RETIRING_DIR
    assert list(tickets.iterdir()), "no retirement was deferred"
    assert replica_leftovers(target, "d") == [], "a version awaiting its grace is not a leftover"
    time.sleep(2.1)
    engine.execute(f"REPL LOAD d FROM '{inc.dump_dir}'")  # nothing new to apply; retires what is due
    assert not os.path.exists(first_version)
    assert not tickets.exists()
    assert replica_leftovers(target, "d") == []
    source.close()
    target.close()
