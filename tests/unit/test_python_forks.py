"""The tests' forked CLI runs (``tests.python_forks``) answer as a fresh ``python -m hmsrepl.cli`` does.

The suite trusts hundreds of command results to the forks; if a child kept something of the server (its
environment, its working directory, a module's state) a test would pass or fail for the wrong reason.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests import python_forks


def fresh(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return python_forks.run_fresh("hmsrepl.cli", args, env, timeout=120, cwd=cwd)


@pytest.fixture
def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HMSREPL_")}
    return {**clean, "PYTHONPATH": python_forks.PYTHONPATH}


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],  # the program's name as python -m gives it
        ["no-such-command"],  # a usage error: status 2
        [
            "repl",
            "run",
            "REPL STATUS sales_dr",
            "--target-db-url",
            "sqlite:////nonexistent/m.db",
        ],  # one line, 1
        ["schema", "upgrade"],  # the database the environment names, relative to the working directory
    ],
)
def test_a_forked_run_answers_as_a_fresh_interpreter(
    args: list[str], env: dict[str, str], tmp_path: Path
) -> None:
    env["HMSREPL_DB_URL"] = "sqlite:///metastore.db"
    runs = []
    for run in (fresh, lambda a, e, c: python_forks.run_cli(a, e, timeout=120, cwd=str(c))):
        cwd = tmp_path / str(len(runs))
        cwd.mkdir()
        done = run(args, env, cwd)
        made = sorted(p.relative_to(cwd).as_posix() for p in cwd.rglob("*"))
        runs.append(
            (
                done.returncode,
                done.stdout.replace(str(cwd), "CWD"),
                done.stderr.replace(str(cwd), "CWD"),
                made,
            )
        )
    assert runs[0] == runs[1]
    assert runs[0][0] == {"--help": 0, "no-such-command": 2, "repl": 1, "schema": 0}[args[0]], runs[0]
    assert ("metastore.db" in runs[0][3]) == (args[0] == "schema")


def test_a_forked_run_has_the_commands_environment_only(env: dict[str, str], tmp_path: Path) -> None:
    """A variable the server was started with but the command's environment lacks is not seen: the second
    run, without ``HMSREPL_DB_URL``, uses the default database, not the first run's."""
    named = python_forks.run_cli(
        ["schema", "upgrade"], {**env, "HMSREPL_DB_URL": f"sqlite:///{tmp_path}/named.db"}, 60, str(tmp_path)
    )
    assert named.returncode == 0 and "named.db" in named.stdout, named
    default = python_forks.run_cli(["schema", "upgrade"], env, 60, str(tmp_path))
    assert default.returncode == 0 and "named.db" not in default.stdout, default


def test_a_run_past_its_timeout_is_killed(env: dict[str, str], tmp_path: Path) -> None:
    env["HMSREPL_DB_URL"] = f"sqlite:///{tmp_path}/m.db"
    assert python_forks.run_cli(["schema", "upgrade"], env, 60, str(tmp_path)).returncode == 0
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        python_forks.run_cli(["metastore", "serve", "--port", "0"], env, timeout=3, cwd=str(tmp_path))
    assert time.monotonic() - started < 30
    assert python_forks.run_cli(["--help"], env, 60, str(tmp_path)).returncode == 0  # the server forks on
