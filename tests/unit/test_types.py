"""mypy checks the core (``include/hmsrepl``) and the Spark and Airflow layers over it strictly, with the
project's configuration (pyproject.toml), in
``make test``: a change to a field, a signature or a payload is found by the tool, not in production.

Modules not yet strict are listed in ``[[tool.mypy.overrides]]`` with the reason; the list only shrinks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.servers import REPO


def _mypy(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-error-summary",
            "--cache-dir",
            str(REPO / "var" / "mypy-cache"),
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_core_type_checks_strictly() -> None:
    done = _mypy("--config-file", str(REPO / "pyproject.toml"))
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]


def test_the_exceptions_are_few_and_each_gives_its_reason() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert set(config["files"]) == {"include/hmsrepl", "spark_apps", "plugins", "dags"}, (
        "every layer is checked"
    )
    text = (REPO / "pyproject.toml").read_text()
    for override in config.get("overrides", []):
        if not override.get("ignore_errors"):
            continue  # how a library without stubs is read, not a module of ours let off
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        assert len(modules) <= 15, "the list of modules not yet strict only shrinks"
        for module in modules:
            assert f'"{module}",  # ' in text, f"{module}: say why it is not strict yet, on its line"


def test_a_planted_type_error_fails_the_check(tmp_path: Path) -> None:
    """The check itself: a copy of a core module with one wrong return type fails under the same settings,
    naming the file (only that module is checked: the imports it follows are read, not re-checked)."""
    shutil.copytree(REPO / "include", tmp_path / "include")
    planted = tmp_path / "include" / "hmsrepl" / "formats" / "paths.py"
    planted.write_text(planted.read_text() + '\n\ndef planted_count() -> int:\n    return "three"\n')
    done = _mypy(
        "--config-file", str(REPO / "pyproject.toml"), "--follow-imports=silent", str(planted), cwd=tmp_path
    )
    assert done.returncode == 1
    assert (
        "paths.py" in done.stdout
        and 'Incompatible return value type (got "str", expected "int")' in done.stdout
    )
