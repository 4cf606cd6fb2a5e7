"""A Hive import that copies files reads the stock metastore's files only below the operator's roots of it.

A hostile Thrift metastore (``fake_stock_source``) names a managed table at a directory of its choosing: a
victim directory outside the operator's ``--source-warehouse``, directly, through ``..``, or through a
directory inside the warehouse that is a symlink to the victim. ``hmsrepl import run --copy`` must refuse
before anything is written (one line naming the table and the option to set, exit 1, no traceback): the
victim (hashed), the target's rows, files and notification log stay as they were, and no copy of the
victim's files exists. Without the operator's roots a copy is refused outright. The target runs on SQLite
and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.hive_import.importer import HiveImporter, ImportOptions
from hmsrepl.hive_import.reader import StockMetastoreReader
from hmsrepl.hive_source.roots import StockRoots, StockRootsError
from tests.backends import temporary_database
from tests.helpers import open_replica
from tests.security.fake_stock_source import HostileMetastore, hostile_metastore
from tests.security.test_stock_source_roots import SECRET, Scene
from tests.servers import REPO


@pytest.fixture(params=["sqlite", "postgres"])
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scene]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    with temporary_database(request.param, str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        try:
            yield Scene(tmp_path, target)
        finally:
            target.close()


def _location(scene: Scene, spelling: str) -> str:
    if spelling == "dot-dot":
        return f"{scene.warehouse}/sales.db/../../victim"
    if spelling == "symlink":  # inside the warehouse as written, the victim where it leads
        os.symlink(scene.victim, scene.warehouse / "sales.db" / "loot")
        return str(scene.warehouse / "sales.db" / "loot")
    return str(scene.victim)


def _copy(scene: Scene, uri: str, roots: StockRoots | None) -> None:
    reader = StockMetastoreReader(uri)
    try:
        HiveImporter(reader, scene.replica, ImportOptions(copy=True, roots=roots)).run()
    finally:
        reader.close()


def _assert_nothing_copied(scene: Scene) -> None:
    """No file of the target holds the victim's secret."""
    for top in (scene.replica.config.warehouse, scene.replica.config.cmroot):
        for path in Path(top).rglob("*"):
            assert not (path.is_file() and SECRET in path.read_bytes()), path


@pytest.mark.parametrize("spelling", ["plain", "dot-dot", "symlink"])
def test_a_copied_table_outside_the_operators_roots_is_refused(scene: Scene, spelling: str) -> None:
    answers = HostileMetastore(
        {"hive.metastore.warehouse.dir": str(scene.root)},  # its own answer, never used
        db_location=str(scene.warehouse / "sales.db"),
        table_location=_location(scene, spelling),
        managed=True,
    )
    roots = StockRoots.from_settings("stock", str(scene.warehouse), None, need_cmroot=False)
    before = scene.untouched()
    with hostile_metastore(answers) as uri, pytest.raises(StockRootsError) as info:
        _copy(scene, uri, roots)
    message = str(info.value)
    assert "\n" not in message and "table 'sales.loot'" in message, message
    if spelling == "plain":  # the others are no place to add as a root: '..' is refused, the link resolved
        assert "--source-external-roots" in message, message
    scene.assert_untouched(before)
    _assert_nothing_copied(scene)
    assert scene.replica.catalog.get_databases() == ["default"]


def test_a_copied_table_below_the_operators_roots_is_copied(scene: Scene) -> None:
    """The same import, the table in the stock warehouse: its file is copied into the target's warehouse."""
    table_dir = scene.warehouse / "sales.db" / "loot"
    table_dir.mkdir()
    (table_dir / "part-0").write_bytes(b"rows")
    answers = HostileMetastore(
        {}, db_location=str(scene.warehouse / "sales.db"), table_location=str(table_dir), managed=True
    )
    roots = StockRoots.from_settings("stock", str(scene.warehouse), None, need_cmroot=False)
    with hostile_metastore(answers) as uri:
        _copy(scene, uri, roots)
    copied = scene.replica.catalog.get_table("sales", "loot").sd.location or ""
    assert copied.startswith(str(scene.replica.config.warehouse))
    assert (Path(copied) / "part-0").read_bytes() == b"rows"
    assert (table_dir / "part-0").read_bytes() == b"rows"


def test_a_copy_without_the_operators_roots_is_refused(scene: Scene) -> None:
    answers = HostileMetastore(
        {}, db_location=str(scene.warehouse / "sales.db"), table_location=str(scene.victim), managed=True
    )
    before = scene.untouched()
    with hostile_metastore(answers) as uri, pytest.raises(StockRootsError, match="--source-warehouse"):
        _copy(scene, uri, None)
    assert not any(call.startswith("get_table") for call in answers.calls)
    scene.assert_untouched(before)


def test_the_command_refuses_in_one_line_and_changes_nothing(tmp_path: Path) -> None:
    """``hmsrepl import run --copy``: exit 1, one line naming the table and the option, no traceback."""
    with temporary_database("sqlite", str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        try:
            scene = Scene(tmp_path, target)
            answers = HostileMetastore(
                {}, db_location=str(scene.warehouse), table_location=str(scene.victim), managed=True
            )
            before = scene.untouched()
            with hostile_metastore(answers) as uri:
                runs = [
                    [],  # no roots at all
                    ["--source-warehouse", str(scene.warehouse)],  # roots that do not hold the victim
                ]
                outcomes = []
                for extra in runs:
                    config = target.config
                    outcomes.append(
                        subprocess.run(
                            [
                                sys.executable,
                                "-m",
                                "hmsrepl.cli",
                                *("--db-url", config.db_url, "--warehouse", str(config.warehouse)),
                                *("--cmroot", str(config.cmroot), "import", "run", uri, "--copy", *extra),
                            ],
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO / 'include'}:{REPO}"},
                            capture_output=True,
                            text=True,
                            timeout=120,
                        )
                    )
            for done, expected in zip(outcomes, ["--source-warehouse", "table 'sales.loot'"], strict=True):
                assert done.returncode == 1, done.stdout + done.stderr
                lines = done.stderr.strip().splitlines()
                assert len(lines) == 1 and expected in lines[0] and "Traceback" not in done.stderr, lines
            scene.assert_untouched(before)
            _assert_nothing_copied(scene)
        finally:
            target.close()
