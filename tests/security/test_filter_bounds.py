"""Partition filters are client input that costs database time: bounded in size and nesting before any SQL
is built, and run under a statement timeout on PostgreSQL and MariaDB (a 20,000-term filter once kept a
PostgreSQL backend busy for minutes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.backends import temporary_database
from tests.security.serving import ServerProcess, hms, serve
from tests.security.test_resource_bounds import _sd, assert_served

PARTITIONS = 200


def _partitioned_table(server: ServerProcess, db: str = "filters") -> None:
    client = server.client()
    try:
        client.create_database(hms.Database(name=db, parameters={}))
        client.create_table(
            hms.Table(
                tableName="t",
                dbName=db,
                sd=_sd(),
                partitionKeys=[hms.FieldSchema("p", "string", None), hms.FieldSchema("q", "int", None)],
                tableType="MANAGED_TABLE",
                parameters={},
            )
        )
        client.add_partitions(
            [
                hms.Partition(values=[f"v{i}", str(i)], dbName=db, tableName="t", sd=_sd(), parameters={})
                for i in range(PARTITIONS)
            ]
        )
    finally:
        client.close()


def or_filter(terms: int) -> str:
    return " or ".join(f'(p = "x{i}" and q > {i})' if i % 2 else f'p = "x{i}"' for i in range(terms))


def nested_filter(levels: int) -> str:
    """q = 199 and (q = 198 or (q = 197 and (...))): each level is an AND or OR inside the previous one."""
    nested = "q = 0"
    for i in range(1, levels):
        nested = f"q = {i} {'and' if i % 2 else 'or'} ({nested})"
    return nested


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("filters")
    with serve(root, f"sqlite:///{root}/metastore.db") as running:
        _partitioned_table(running)
        yield running


@pytest.mark.parametrize(
    ("filter_text", "message"),
    [
        (or_filter(20_000), "characters is longer than the limit of 100000 (HMSREPL_FILTER_MAX_CHARS)"),
        (
            " or ".join(f"q = {i}" for i in range(1_500)),
            "has 1500 comparisons, more than the limit of 1000 (HMSREPL_FILTER_MAX_TERMS)",
        ),
        (nested_filter(200), "levels deep, more than the limit of 50 (HMSREPL_FILTER_MAX_DEPTH)"),
        ("not " * 5_000 + "q = 1", "levels deep, more than the limit of 50 (HMSREPL_FILTER_MAX_DEPTH)"),
    ],
    ids=["20000-terms", "1500-terms", "200-levels", "5000-nots"],
)
def test_oversized_filters_are_refused_before_the_database(
    default_server: ServerProcess, filter_text: str, message: str
) -> None:
    client = default_server.client()
    try:
        started = time.monotonic()
        with pytest.raises(hms.MetaException) as refused:
            client.get_partitions_by_filter("filters", "t", filter_text, -1)
        assert time.monotonic() - started < 2.0
        assert message in refused.value.message
        assert "\n" not in refused.value.message and len(refused.value.message) < 400
        assert len(client.get_partitions_by_filter("filters", "t", 'p = "v3" or q >= 198', -1)) == 3
    finally:
        client.close()


@pytest.mark.parametrize(
    "backend",
    [pytest.param("postgres", marks=pytest.mark.postgres), pytest.param("mysql", marks=pytest.mark.mysql)],
)
def test_statement_timeout_cancels_a_20000_term_filter(backend: str, tmp_path: Path) -> None:
    limit = 0.2 if backend == "postgres" else 0.05
    with (
        temporary_database(backend, str(tmp_path)) as url,
        serve(
            tmp_path,
            url,
            HMSREPL_FILTER_MAX_CHARS="10000000",
            HMSREPL_FILTER_MAX_TERMS="100000",
            # Far below what a 20,000-term filter takes on any database here, however idle the machine
            # (MariaDB looks its terms up as index ranges: some runs took under 0.2 s on a fast day).
            HMSREPL_FILTER_STATEMENT_TIMEOUT_SECONDS=str(limit),
        ) as server,
    ):
        _partitioned_table(server)
        outcome: list[BaseException | None] = []

        def attack() -> None:
            client = server.client(timeout_ms=120_000)
            try:
                client.get_partitions_by_filter("filters", "t", or_filter(20_000), -1)
                outcome.append(None)
            except BaseException as exc:  # checked by the test thread
                outcome.append(exc)
            finally:
                client.close()

        started = time.monotonic()
        attacker = threading.Thread(target=attack)
        attacker.start()
        while attacker.is_alive() and time.monotonic() - started < 120:
            assert_served(server, within=5.0)  # other clients are served throughout
            time.sleep(0.5)
        attacker.join()
        elapsed = time.monotonic() - started
        assert len(outcome) == 1 and isinstance(outcome[0], hms.MetaException), outcome
        assert outcome[0].message == (
            f"partition filter on 'filters.t' took longer than the limit of {limit:g} s "
            "(HMSREPL_FILTER_STATEMENT_TIMEOUT_SECONDS) and was cancelled; use a narrower or simpler filter"
        )
        assert elapsed < 60
        assert not _busy_backends(url), "the database still runs the cancelled query"
        client = server.client()
        try:
            assert len(client.get_partitions_by_filter("filters", "t", "q < 10", -1)) == 10
        finally:
            client.close()


def _busy_backends(url: str) -> list[str]:
    parsed = make_url(url)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if parsed.get_backend_name() == "postgresql":
                rows = conn.execute(
                    text(
                        "SELECT left(query, 60) FROM pg_stat_activity WHERE datname = :db AND state = 'active' "
                        "AND pid <> pg_backend_pid()"
                    ),
                    {"db": parsed.database},
                )
            else:
                rows = conn.execute(
                    text(
                        "SELECT left(info, 60) FROM information_schema.processlist WHERE db = :db "
                        "AND command = 'Query' AND id <> connection_id()"
                    ),
                    {"db": parsed.database},
                )
            return [row[0] for row in rows]
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("backend", "endless"),
    [
        ("sqlite", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"),
        pytest.param("postgres", "SELECT pg_sleep(30)", marks=pytest.mark.postgres),
    ],
)
def test_statement_time_limit_cancels_and_leaves_the_connection_clean(
    backend: str, endless: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hmsrepl.bounds import resource_bounds
    from hmsrepl.exceptions import LimitExceededError
    from hmsrepl.metastore.database import make_engine
    from hmsrepl.metastore.partition_filter import statement_time_limit

    monkeypatch.setenv("HMSREPL_FILTER_STATEMENT_TIMEOUT_SECONDS", "0.5")
    resource_bounds.cache_clear()
    try:
        with temporary_database(backend, str(tmp_path)) as url:
            engine = make_engine(url, pool_size=1)
            try:
                started = time.monotonic()
                with (
                    pytest.raises(
                        LimitExceededError, match=r"^the probe took longer than the limit of 0\.5 s"
                    ),
                    engine.connect() as conn,
                    statement_time_limit(conn, "the probe"),
                ):
                    conn.exec_driver_sql(endless).all()
                assert time.monotonic() - started < 10
                with engine.connect() as conn:  # the pooled connection runs without a limit again
                    assert conn.exec_driver_sql("SELECT 1").scalar() == 1
                    if backend == "postgres":
                        assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "0"
            finally:
                engine.dispose()
    finally:
        resource_bounds.cache_clear()
