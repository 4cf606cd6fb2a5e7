"""Architecture: only ``hmsrepl.storage`` touches the file system directly.

The rule is ruff's banned-API check (TID251, configured in pyproject.toml) over ``include/hmsrepl``, with
``storage/`` and an explicit, commented whitelist of modules that handle no warehouse path exempt. Ruff does
not resolve builtins, so ``open()`` is held to the same whitelist here. Each check is also run on a planted
violation, so a configuration that stopped checking would fail this test instead of passing silently.

The same rule bans the unbound entry points of ``hmsrepl.storage`` (``filesystem_for``, ``copy_file``,
``copy_files``, ``move_file``) outside ``storage/``: a module reaches files only through a ``RootedFileSystem``
bound to the roots of its work. The thin layers (Spark apps, Airflow plugins, DAGs) import none of them.
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


UNBOUND = (
    "hmsrepl.storage.filesystem_for",
    "hmsrepl.storage.base.filesystem_for",
    "hmsrepl.storage.copy_file",
    "hmsrepl.storage.base.copy_file",
    "hmsrepl.storage.copy_files",
    "hmsrepl.storage.base.copy_files",
    "hmsrepl.storage.move_file",
    "hmsrepl.storage.base.move_file",
)
PLANTED_UNBOUND = """from hmsrepl.storage import filesystem_for
from hmsrepl.storage.base import copy_file, move_file


def peek(uri: str) -> bool:
    return filesystem_for(uri).exists(uri)


def carry(src: str, dst: str) -> None:
    copy_file(src, dst)
    move_file(dst, src)
"""


def test_the_unbound_entry_points_are_banned_outside_storage() -> None:
    """Outside storage/, files are reached only through a RootedFileSystem: the store picker and the unbound
    copy/move helpers are banned with a message that names the bound ones."""
    banned = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"][
        "flake8-tidy-imports"
    ]["banned-api"]
    for name in UNBOUND:
        assert "RootedFileSystem" in banned[name]["msg"], name


def test_the_unbound_ban_fails_on_a_planted_use(tmp_path: Path) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    for directory in ("replication", "storage"):
        (tmp_path / "include" / "hmsrepl" / directory).mkdir(parents=True)
        (tmp_path / "include" / "hmsrepl" / directory / "unbound.py").write_text(PLANTED_UNBOUND)
    result = ruff("include/hmsrepl", cwd=tmp_path)
    assert result.returncode == 1
    assert "include/hmsrepl/replication/unbound.py:1:29" in result.stdout  # filesystem_for
    assert "`hmsrepl.storage.filesystem_for` is banned" in result.stdout
    assert "`hmsrepl.storage.base.copy_file` is banned" in result.stdout
    assert "`hmsrepl.storage.base.move_file` is banned" in result.stdout
    assert "storage/unbound.py" not in result.stdout  # the choke point itself may


def unbound_imports(root: Path, paths: list[Path]) -> list[str]:
    """``file:line name`` of every import of an unbound entry point in ``paths`` (thin layers: Spark apps,
    Airflow plugins and DAGs reach files through the core's rooted helpers, never the stores)."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in UNBOUND:
                        found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {alias.name}")
    return found


def test_spark_apps_plugins_and_dags_use_no_unbound_entry_point(tmp_path: Path) -> None:
    thin = [
        path for layer in ("spark_apps", "plugins", "dags") for path in sorted((REPO / layer).rglob("*.py"))
    ]
    assert thin and unbound_imports(REPO, thin) == []
    planted = tmp_path / "spark_apps" / "copier.py"
    planted.parent.mkdir()
    planted.write_text(PLANTED_UNBOUND)
    assert unbound_imports(tmp_path, [planted]) == [
        "spark_apps/copier.py:1 filesystem_for",
        "spark_apps/copier.py:2 copy_file",
        "spark_apps/copier.py:2 move_file",
    ]
