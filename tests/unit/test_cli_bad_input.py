"""Every CLI command, given bad input, exits non-zero with one line on stderr and no Python traceback.

Operators and DAG tasks read that line: it names what is wrong and the fix. Each leaf command of the CLI has
at least one case here with input it must refuse (a missing metastore, a schema never created, a value out of
range, an unknown option), so a new command without a case fails ``test_every_command_has_a_case``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from hmsrepl.cli import main
from hmsrepl.metastore.database import upgrade_schema


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from leaf_commands(command, (*prefix, name))
        else:
            yield (*prefix, name)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A metastore database with its schema, one without (never upgraded), and a file that is no directory."""
    root = tmp_path_factory.mktemp("cli")
    ready = f"sqlite:///{root}/ready.db"
    upgrade_schema(ready)
    (root / "a-file").write_text("not a directory")
    return {
        "ready": ready,
        "bare": f"sqlite:///{root}/bare.db",
        "file": str(root / "a-file"),
        "root": str(root),
    }


def cases(dbs: dict[str, str]) -> dict[tuple[str, ...], list[tuple[str, list[str]]]]:
    """Bad input per command: (the metastore database it runs on, arguments after the command path)."""
    bare, ready, file = dbs["bare"], dbs["ready"], dbs["file"]
    no_schema = ("bare", [])
    return {
        ("schema", "upgrade"): [("ready", ["--revision", "nosuch"])],
        ("metastore", "serve"): [("ready", ["--host", "0.0.0.0"]), ("ready", ["--port", "many"])],
        ("metastore", "reconcile"): [no_schema],
        ("metastore", "check"): [no_schema],
        ("events", "current-id"): [no_schema],
        ("events", "show"): [no_schema],
        ("events", "count"): [
            ("ready", ["--db", "sales", "--from", "yesterday"]),
            ("bare", ["--db", "sales"]),
        ],
        ("events", "cleanup"): [no_schema],
        ("repl", "run"): [
            ("ready", ["REPL STATUS sales"]),  # no target metastore
            ("ready", ["REPL FROBNICATE sales"]),
            ("ready", ["REPL LOAD sales FROM '/nonexistent/dump'", "--target-db-url", ready]),
            ("ready", ["REPL STATUS sales", "--target-db-url", bare]),
            ("ready", ["REPL DUMP sales", "--source-db-url", "thrift://127.0.0.1:1"]),
        ],
        ("repl", "prune-dumps"): [
            ("ready", ["--retention-seconds", "-1"]),
            ("ready", ["--target-db-url", bare]),
        ],
        ("repl", "metrics"): [("ready", []), ("ready", ["--target-db-url", bare])],
        ("repl", "verify"): [
            ("ready", ["sales", "sales_dr"]),
            ("ready", ["sales", "dr", "--target-db-url", bare]),
        ],
        ("repl", "unprotect"): [("ready", ["sales_dr", "--reason", "test"]), ("ready", ["sales_dr"])],
        ("repl", "failover"): [("ready", ["sales", "sales_dr"])],
        ("repl", "promote"): [("ready", ["sales_dr"]), ("ready", ["sales_dr", "--target-db-url", ready])],
        ("repl", "failback"): [("ready", ["sales_dr", "sales"])],
        ("repl", "lag"): [("ready", ["sales", "sales_dr", "--target-db-url", ready])],
        ("repl", "cleanup"): [("ready", ["sales_dr"]), ("ready", ["sales_dr", "--target-db-url", ready])],
        ("cm", "cleanup"): [no_schema],
        ("intents", "list"): [no_schema],
        ("intents", "run"): [no_schema, ("ready", ["--lease-seconds", "soon"])],
        ("txns", "abort-timed-out"): [no_schema],
        ("txns", "show"): [no_schema],
        ("import", "run"): [
            ("ready", ["thrift://127.0.0.1:1"]),
            ("ready", ["http://metastore:9083"]),
            ("ready", ["thrift://127.0.0.1:1", "--copy"]),  # no --source-warehouse: its files are not read
        ],
        ("import", "verify"): [("ready", ["thrift://127.0.0.1:1"])],
        ("compact",): [
            no_schema,
            ("ready", ["--table", "events"]),
            ("ready", ["--table", "sales.events", "--engine", "copy"]),
            ("ready", ["--delta-threshold", "0"]),
        ],
        ("demo",): [("ready", ["--home", f"{file}/demo"])],
        ("restore", "table"): [no_schema, ("ready", ["sales"]), ("ready", ["sales.orders"])],
        ("restore", "partitions"): [("ready", ["sales.orders", "--partition", "day=d1"])],
        ("restore", "database"): [no_schema, ("ready", ["sales"]), ("ready", ["sales", "--limit", "-1"])],
        ("restore", "revert"): [
            ("ready", ["sales.orders"]),
            ("ready", ["sales.orders", "--time", "yesterday"]),
            ("ready", ["sales.orders", "--event", "0"]),
            ("ready", ["sales.orders", "--event", "3", "--time", "2026-01-01T00:00:00Z"]),
        ],
    }


def run(path: tuple[str, ...], db: str, args: list[str], dbs: dict[str, str]) -> tuple[int, str, str]:
    """Run ``hmsrepl --db-url <db> <path> <args>`` with no HMSREPL_* setting of the test's environment."""
    env: dict[str, str | None] = {key: None for key in os.environ if key.startswith("HMSREPL_")}
    env.update(HMSREPL_WAREHOUSE=f"{dbs['root']}/wh", HMSREPL_CMROOT=f"{dbs['root']}/cm")
    result = CliRunner().invoke(main, ["--db-url", dbs[db], *path, *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_every_command_has_a_case(dbs: dict[str, str]) -> None:
    assert set(leaf_commands(main)) == set(cases(dbs))


def test_bad_input_is_one_line_and_a_non_zero_exit(dbs: dict[str, str]) -> None:
    failures = []
    for path, runs in cases(dbs).items():
        for db, args in [*runs, ("ready", ["--no-such-option"])]:
            code, out, err = run(path, db, args, dbs)
            lines = err.strip().splitlines()
            if code == 0 or len(lines) != 1 or not lines[0].startswith("Error: ") or "Traceback" in out + err:
                failures.append((" ".join(path), args, code, err[-500:]))
    assert failures == []


def test_usage_errors_name_the_help_of_their_command(dbs: dict[str, str]) -> None:
    code, _, err = run(("repl", "run"), "ready", [], dbs)
    assert code == 2
    assert err == "Error: Missing argument 'COMMAND'. (see 'main repl run --help')\n"


def test_unexpected_errors_name_their_kind_and_the_traceback_switch(dbs: dict[str, str]) -> None:
    code, _, err = run(("schema", "upgrade"), "ready", ["--revision", "nosuch"], dbs)
    assert code == 1
    assert err.startswith("Error: CommandError: Can't locate revision identified by 'nosuch'")
    assert err.rstrip().endswith("(set HMSREPL_CLI_TRACEBACK=1 to see where)")
