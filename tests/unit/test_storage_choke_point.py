"""Architecture: only ``hmsrepl.storage`` touches the file system directly.

The rule is ruff's banned-API check (TID251, configured in pyproject.toml) over ``include/hmsrepl``, with
``storage/`` and an explicit, commented whitelist of modules that handle no warehouse path exempt. Ruff does
not resolve builtins, so ``open()`` is held to the same whitelist here. Each check is also run on a planted
violation, so a configuration that stopped checking would fail this test instead of passing silently.
"""

from __future__ import annotations

import ast
import fnmatch
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "include" / "hmsrepl"
RULE = "TID251"
PLANTED = """import os
import shutil


def sweep(directory: str) -> None:
    os.rmdir(directory)
    shutil.rmtree(directory)
"""


def ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", RULE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def exempt_globs() -> list[str]:
    """The per-file ignores of the rule in pyproject.toml: the whitelist (negated globs excluded)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    ignores = config["tool"]["ruff"]["lint"]["per-file-ignores"]
    return [glob for glob, rules in ignores.items() if RULE in rules and not glob.startswith("!")]


def open_calls(root: Path, exempt: list[str]) -> list[str]:
    """``file:line`` of every call of the builtin ``open`` in modules below ``root`` not exempt."""
    found = []
    for path in sorted((root / "include" / "hmsrepl").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if any(fnmatch.fnmatch(relative, glob) for glob in exempt):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                found.append(f"{relative}:{node.lineno}")
    return found


def test_no_module_outside_storage_calls_the_file_system_directly() -> None:
    result = ruff("include/hmsrepl", cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert open_calls(REPO, exempt_globs()) == []


def test_the_rule_is_configured_for_the_modules_it_guards() -> None:
    exempt = exempt_globs()
    assert "include/hmsrepl/storage/**" in exempt
    for guarded in ("metastore/change_manager.py", "replication/load.py", "replication/leftovers.py"):
        assert not any(fnmatch.fnmatch(f"include/hmsrepl/{guarded}", glob) for glob in exempt)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A copy of the configuration with one violation in a core module and the same code in storage/."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    for directory in ("replication", "storage"):
        (tmp_path / "include" / "hmsrepl" / directory).mkdir(parents=True)
        (tmp_path / "include" / "hmsrepl" / directory / "sweeper.py").write_text(
            PLANTED
            + "\n\ndef peek(path: str) -> bytes:\n    with open(path, 'rb') as f:\n        return f.read()\n"
        )
    return tmp_path


def test_the_rule_fails_on_a_planted_violation(planted: Path) -> None:
    result = ruff("include/hmsrepl", cwd=planted)
    assert result.returncode == 1
    assert "include/hmsrepl/replication/sweeper.py:6:5" in result.stdout  # os.rmdir
    assert "`shutil` is banned" in result.stdout
    assert "storage/sweeper.py" not in result.stdout  # the choke point itself may
    assert open_calls(planted, exempt_globs()) == ["include/hmsrepl/replication/sweeper.py:11"]
