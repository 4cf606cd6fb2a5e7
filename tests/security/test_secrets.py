"""Secrets and messages: a password in a database URL is never printed (CLI output, errors, server log), and
errors sent to Thrift clients are one line without SQL, parameters or Python internals."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from hmsrepl.metastore.database import display_url
from tests.backends import temporary_database
from tests.security.serving import ServerProcess, hms, serve
from tests.security.test_resource_bounds import _sd
from tests.servers import REPO, free_port

SECRET = f"S3cr3t-{uuid.uuid4().hex[:8]}"
pytestmark = pytest.mark.postgres


def with_password(url: str) -> str:
    return make_url(url).set(password=SECRET).render_as_string(hide_password=False)


def hmsrepl(*args: str, db_url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")]),
    }
    if db_url is not None:
        env["HMSREPL_DB_URL"] = db_url
    return subprocess.run(
        [sys.executable, "-m", "hmsrepl.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.fixture
def secret_url(tmp_path: Path) -> Iterator[str]:
    """A fresh, empty PostgreSQL database (trust authentication: any password is accepted) named by a URL with
    one."""
    with temporary_database("postgres", str(tmp_path), empty=True) as url:
        yield with_password(url)


def test_display_url_masks_passwords() -> None:
    assert display_url(f"postgresql+psycopg://u:{SECRET}@h:5432/d") == "postgresql+psycopg://u:***@h:5432/d"
    assert SECRET not in display_url(f"mysql+pymysql://u@h/d?password={SECRET}&charset=utf8mb4")
    assert SECRET not in display_url(f"not a url {SECRET}")


def test_cli_never_prints_the_password(secret_url: str, tmp_path: Path) -> None:
    missing = hmsrepl("events", "current-id", db_url=secret_url)
    assert missing.returncode == 1
    assert (
        "schema at postgresql+psycopg://postgres:***@" in missing.stderr
        and "is missing or old" in missing.stderr
    )

    upgraded = hmsrepl("schema", "upgrade", db_url=secret_url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "metastore schema at postgresql+psycopg://postgres:***@" in upgraded.stdout

    with temporary_database("postgres", str(tmp_path), empty=True) as other:
        status = hmsrepl("repl", "run", "REPL STATUS dr", "--target-db-url", with_password(other))
    assert status.returncode == 1 and "target metastore schema at" in status.stderr

    closed_port = free_port()
    unreachable = hmsrepl(
        "schema", "upgrade", db_url=f"postgresql+psycopg://postgres:{SECRET}@127.0.0.1:{closed_port}/x"
    )
    assert unreachable.returncode == 1
    assert (
        unreachable.stderr.startswith("Error: database error: ") and len(unreachable.stderr.splitlines()) == 1
    )

    for result in (missing, upgraded, status, unreachable):
        assert SECRET not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr


@pytest.fixture
def server(secret_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    with serve(tmp_path / "server", secret_url) as running:
        yield running


def test_server_log_and_client_errors_hold_no_secret_sql_or_internals(server: ServerProcess) -> None:
    client = server.client()
    try:
        client.create_table(
            hms.Table(
                tableName="t",
                dbName="default",
                sd=_sd(),
                partitionKeys=[hms.FieldSchema("p", "string", None)],
                tableType="EXTERNAL_TABLE",
                parameters={"EXTERNAL": "TRUE"},
            )
        )
        with pytest.raises(hms.MetaException) as refused:  # PostgreSQL refuses a NUL: its reason, not its SQL
            client.get_table("default", "t\x00")
        message = refused.value.message
        assert message == (
            "get_table: the metastore database refuses a value of the request (PostgreSQL text fields cannot "
            "contain NUL (0x00) bytes); remove NUL characters and shorten the values"
        )
        with pytest.raises(hms.InvalidObjectException) as invalid:
            client.create_database(hms.Database(name=None, parameters={}))
        assert "\n" not in invalid.value.message
        for text in (message, invalid.value.message):
            assert not re.search(r"\bSQL\b|INSERT|SELECT|parameters|Traceback|File \"", text), text
        with pytest.raises(hms.NoSuchObjectException, match="database 'nope' does not exist"):
            client.get_database("nope")
        assert "default" in client.get_all_databases()  # the connection is still usable
    finally:
        client.close()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(60) == 0
    log = server.log()
    assert "postgres:***@" in log
    assert SECRET not in log


def test_an_internal_error_reaches_the_client_as_an_id_and_its_detail_stays_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from hmsrepl.thrift.handler import ErrorMappingDispatcher

    class Failing:
        def get_database(self, name: str) -> None:
            raise RuntimeError(f"SELECT password FROM users WHERE name = '{name}' ({SECRET})")

    with (
        caplog.at_level("ERROR", logger="hmsrepl.thrift.handler"),
        pytest.raises(Exception) as raised,  # the server's own IDL module's MetaException
    ):
        ErrorMappingDispatcher(Failing()).get_database("sales")  # type: ignore[arg-type]
    assert type(raised.value).__name__ == "MetaException"
    match = re.fullmatch(
        r"internal error ([0-9a-f]{12}) in get_database; see the metastore server log for the details",
        raised.value.message,
    )
    assert match, raised.value.message
    [record] = [r for r in caplog.records if f"error id {match.group(1)}" in r.getMessage()]
    assert record.exc_info is not None and "SELECT password" in str(record.exc_info[1])
