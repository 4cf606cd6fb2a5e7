"""The docs site builds without a broken link, documents every setting, and the README stays a front page."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the docs under ``root``: a broken link or anchor is an error (not with
    ``-q``: quiet drops the warnings strict mode counts)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(root / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _reference_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "configuration_reference", REPO / "docs/hooks/configuration_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_build_strictly(tmp_path: Path) -> None:
    done = _build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "site/configuration/index.html").read_text()
    assert "<code>HMSREPL_DB_URL</code>" in page and "<code>HMSREPL_SOURCE_WAREHOUSE</code>" in page


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The check itself: a page linking to a missing page or anchor makes the strict build fail."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs/replication.md"
    page.write_text(
        page.read_text() + "\nSee [the runbook](no-such-page.md) and [dumps](security.md#no-such-anchor).\n"
    )
    done = _build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stdout + done.stderr


def test_every_setting_the_code_reads_is_explained_somewhere() -> None:
    reference = _reference_module()
    generated = reference.reference(REPO / "docs")
    unexplained = re.findall(r"^\| `(HMSREPL_\w+)` \| [^|]+ \| - \|$", generated, flags=re.M)
    assert unexplained == [], f"document these in a docs page: {unexplained}"
    config_rows = [var for var, _, meaning in reference.config_variables() if not meaning]
    assert len(reference.config_variables()) > 20
    assert all(var.startswith("HMSREPL_") for var in config_rows)


def test_an_undocumented_variable_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = _reference_module()
    code = tmp_path / "include"
    code.mkdir()
    (code / "new_feature.py").write_text('LIMIT = os.environ.get("HMSREPL_BRAND_NEW_LIMIT")\n')
    for side in reference.SIDE_PAGES:
        (tmp_path / side).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / side).write_text("")
    monkeypatch.setattr(reference, "REPO", tmp_path)
    generated = reference.reference(REPO / "docs")
    assert "| `HMSREPL_BRAND_NEW_LIMIT` | `include/new_feature.py` | - |" in generated


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    assert text.splitlines()[2:6] == [
        "```bash",
        "make demo   # fresh machine: creates .venv, installs requirements, checks Java, runs the main job on embedded defaults",
        "make test   # the whole test suite (what CI runs): lint, docs, unit and integration tests on SQLite, PostgreSQL, MariaDB",
        "```",
    ]
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (REPO / target).exists(), target
