"""File work that can never succeed (a directory name the file system refuses) is reported once, kept for the
operator and not retried by every housekeeping pass; the operator retries it once the cause is fixed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.helpers import make_table


def _cli_env(store: Metastore) -> dict[str, str]:
    config = store.config
    return {
        "HMSREPL_DB_URL": config.db_url,
        "HMSREPL_WAREHOUSE": config.warehouse,
        "HMSREPL_CMROOT": config.cmroot,
        "HMSREPL_TRASH_ROOT": "",
    }


def test_an_impossible_directory_is_parked_once_and_left_to_the_operator(
    metastore: Metastore, caplog: pytest.LogCaptureFixture
) -> None:
    metastore.catalog.create_database(Database(name="s"))
    location = f"{metastore.config.warehouse}/s.db/{'x' * 300}"  # one segment of 300 bytes: ENAMETOOLONG
    table = make_table("s", "long").model_copy(deep=True)
    table.sd.location = location
    with caplog.at_level(logging.WARNING, logger="hmsrepl.metastore.intents"):
        metastore.catalog.create_table(table)  # the metadata committed; its directory cannot be made
        (intent,) = metastore.catalog.intents.pending()
        assert intent.parked_at is not None and intent.attempts == 1
        assert "File name too long" in (intent.last_error or "")
        for _ in range(3):  # housekeeping passes leave it alone
            result = metastore.complete_file_intents(lease_seconds=0)
            assert (result.completed, result.failed, result.parked) == (0, 0, 0)
    reports = [r for r in caplog.records if "can never succeed" in r.getMessage()]
    assert len(reports) == 1 and reports[0].levelno == logging.ERROR
    assert "hmsrepl intents run --include-parked" in reports[0].getMessage()
    assert not any("failed" in r.getMessage() for r in caplog.records if r is not reports[0])
    (still,) = metastore.catalog.intents.pending()
    assert still.attempts == 1

    runner = CliRunner()
    env = _cli_env(metastore)
    listed = runner.invoke(main, ["intents", "list"], env=env)
    assert listed.exit_code == 0
    assert (
        "parked (can never succeed as it is)" in listed.output
        and "1 pending file intents, 1 parked" in listed.output
    )
    skipped = runner.invoke(main, ["intents", "run"], env=env)
    assert skipped.exit_code == 0 and "0 completed, 0 failed" in skipped.output
    retried = runner.invoke(main, ["intents", "run", "--include-parked"], env=env)
    assert retried.exit_code == 1 and "1 parked (see 'hmsrepl intents list')" in retried.output
    (again,) = metastore.catalog.intents.pending()
    assert again.attempts == 2 and again.parked_at is not None


def test_a_parked_intent_completes_once_its_cause_is_gone(metastore: Metastore, tmp_path: Path) -> None:
    metastore.catalog.create_database(Database(name="s"))
    table = make_table("s", "t").model_copy(deep=True)
    table.sd.location = f"{metastore.config.warehouse}/s.db/{'y' * 300}"
    metastore.catalog.create_table(table)
    (intent,) = metastore.catalog.intents.pending()
    # The operator points the intent at a directory the file system accepts (as after renaming a mount).
    from sqlalchemy import update

    from hmsrepl.metastore.schema import file_intents

    fixed = f"{metastore.config.warehouse}/s.db/fixed"  # inside the metastore's roots, as every intent is
    with metastore.events.transaction() as tx:
        tx.conn.execute(
            update(file_intents)
            .where(file_intents.c.id == intent.id)
            .values(payload=f'{{"dirs": ["{fixed}"]}}')
        )
    result = metastore.complete_file_intents(lease_seconds=0, include_parked=True)
    assert (result.completed, result.parked) == (1, 0)
    assert Path(fixed).is_dir() and metastore.catalog.intents.pending() == []
