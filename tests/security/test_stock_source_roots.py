"""A stock Hive Metastore source cannot choose the roots its files are read from.

A hostile Thrift metastore (``fake_stock_source``) reports a warehouse of its choosing and names a table at
a directory outside the operator's roots (a victim directory holding a secret). The dump must not read that
directory, the load must not copy it: the operator's ``--source-warehouse``/``--source-cmroot`` are required,
the metastore's answers are checked against them, and a location outside them is not read. Each refusal is
one line; the victim (hashed), the replica's rows and files, and its notification log stay as they were,
and no dump holds the victim's files. The replica runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.hive_source.roots import StockRootsError
from hmsrepl.hive_source.source import StockHiveSource
from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.storage.rooted import OutsideRootsError
from tests.backends import temporary_database
from tests.helpers import open_replica
from tests.security.fake_stock_source import HostileMetastore, hostile_metastore
from tests.security.untouched import Untouched
from tests.servers import REPO

SECRET = b"the victim's secret, below no source root"


class Scene:
    def __init__(self, root: Path, replica: Metastore) -> None:
        self.root, self.replica = root, replica
        self.victim = root / "victim"
        self.victim.mkdir()
        (self.victim / "secret.txt").write_bytes(SECRET)
        self.warehouse, self.cmroot = root / "src_wh", root / "src_cm"
        (self.warehouse / "sales.db").mkdir(parents=True)
        self.cmroot.mkdir()
        self.dumps = root / "dumps"

    def guarded(self) -> list[Path | str]:
        return [self.victim, self.replica.config.warehouse, self.replica.config.cmroot]

    def untouched(self) -> Untouched:
        return Untouched.take(self.guarded(), [self.replica])

    def assert_untouched(self, before: Untouched) -> None:
        before.assert_same(self.guarded(), [self.replica])
        dumped = [p for p in self.dumps.rglob("*") if p.is_file()] if self.dumps.exists() else []
        assert not any(SECRET in p.read_bytes() or b"secret.txt" in p.read_bytes() for p in dumped)


@pytest.fixture(params=["sqlite", "postgres"])
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scene]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    with temporary_database(request.param, str(tmp_path)) as url:
        replica = open_replica(url, tmp_path)
        try:
            yield Scene(tmp_path, replica)
        finally:
            replica.close()


def _dump_and_load(scene: Scene, source: StockHiveSource) -> None:
    engine = ReplicationEngine(str(scene.dumps), source, scene.replica)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")  # type: ignore[union-attr]


def test_a_stock_source_without_configured_roots_is_refused(scene: Scene) -> None:
    """The metastore says its warehouse is the victim's parent: that is never taken as a root."""
    answers = HostileMetastore(
        {"hive.metastore.warehouse.dir": str(scene.root), "hive.repl.cmrootdir": str(scene.root)},
        db_location=str(scene.root),
        table_location=str(scene.victim),
    )
    before = scene.untouched()
    with hostile_metastore(answers) as uri:
        with pytest.raises(StockRootsError, match="--source-warehouse") as info:
            StockHiveSource(uri)
        assert "\n" not in str(info.value)
        assert not any(call.startswith("get_table") for call in answers.calls)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "hmsrepl.cli",
                "repl",
                "run",
                "REPL DUMP sales",
                *("--source-db-url", uri, "--target-db-url", scene.replica.config.db_url),
                *("--dump-root", str(scene.dumps)),
            ],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{REPO / 'include'}:{REPO}"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--source-warehouse" in lines[0] and "--source-cmroot" in lines[0], lines
    scene.assert_untouched(before)


@pytest.mark.parametrize("setting", ["hive.metastore.warehouse.dir", "hive.repl.cmrootdir"])
def test_a_reported_root_outside_the_configured_ones_is_refused(scene: Scene, setting: str) -> None:
    """Its warehouse, or the cmroot its change manager (on) keeps dropped files in, outside the roots."""
    answers = HostileMetastore(
        {setting: str(scene.root), "hive.repl.cm.enabled": "true"},
        db_location=str(scene.warehouse / "sales.db"),
        table_location=str(scene.victim),
    )
    before = scene.untouched()
    with hostile_metastore(answers) as uri, pytest.raises(StockRootsError) as info:
        StockHiveSource(uri, warehouse=str(scene.warehouse), cmroot=str(scene.cmroot))
    message = str(info.value)
    assert "\n" not in message and setting in message and "outside the roots configured" in message, message
    assert not any(call.startswith("get_table") for call in answers.calls)
    scene.assert_untouched(before)


@pytest.mark.parametrize("spelling", ["plain", "dot-dot"])
def test_a_table_outside_the_configured_roots_is_not_read(scene: Scene, spelling: str) -> None:
    """The metastore reports nothing odd, but names a table in the victim directory (directly, or through
    ``..`` from inside the warehouse): the dump refuses before listing it, and nothing is loaded."""
    location = str(scene.victim)
    if spelling == "dot-dot":
        location = f"{scene.warehouse}/sales.db/../../victim"
    answers = HostileMetastore({}, db_location=str(scene.warehouse / "sales.db"), table_location=location)
    before = scene.untouched()
    with hostile_metastore(answers) as uri:
        source = StockHiveSource(uri, warehouse=str(scene.warehouse), cmroot=str(scene.cmroot))
        try:
            with pytest.raises(StockRootsError) as info:
                _dump_and_load(scene, source)
        finally:
            source.close()
    message = str(info.value)
    assert "\n" not in message and "sales.loot" in message and "not read" in message, message
    assert "sales_dr" not in scene.replica.catalog.get_databases()
    scene.assert_untouched(before)


def test_a_table_inside_the_configured_roots_still_replicates(scene: Scene) -> None:
    """The roots refuse nothing they should allow: a table below the configured warehouse is copied."""
    table_dir = scene.warehouse / "sales.db" / "loot"
    table_dir.mkdir()
    (table_dir / "000000_0").write_bytes(b"rows\n")
    answers = HostileMetastore(
        {"hive.metastore.warehouse.dir": f"file:{scene.warehouse}"},
        db_location=str(scene.warehouse / "sales.db"),
        table_location=str(table_dir),
    )
    with hostile_metastore(answers) as uri:
        source = StockHiveSource(uri, warehouse=str(scene.warehouse), cmroot=str(scene.cmroot))
        try:
            _dump_and_load(scene, source)
        finally:
            source.close()
    copied = Path(scene.replica.catalog.get_table("sales_dr", "loot").sd.location or "")
    assert (Path(str(copied).removeprefix("file:")) / "000000_0").read_bytes() == b"rows\n"


def test_a_table_directory_that_is_a_symlink_out_of_the_roots_is_not_listed(scene: Scene) -> None:
    """The metastore names a table below the configured warehouse, but that directory is a symlink to the
    victim's: the location passes the textual check, the listing goes through a file system bound to the
    operator's roots and refuses it (one line), before a file is read."""
    link = scene.warehouse / "sales.db" / "loot"
    link.symlink_to(scene.victim, target_is_directory=True)
    answers = HostileMetastore({}, db_location=str(scene.warehouse / "sales.db"), table_location=str(link))
    before = scene.untouched()
    with hostile_metastore(answers) as uri:
        source = StockHiveSource(uri, warehouse=str(scene.warehouse), cmroot=str(scene.cmroot))
        try:
            with pytest.raises(OutsideRootsError) as info:
                _dump_and_load(scene, source)
        finally:
            source.close()
    message = str(info.value)
    assert "\n" not in message and "outside the roots" in message and str(scene.victim) in message, message
    assert "sales_dr" not in scene.replica.catalog.get_databases()
    scene.assert_untouched(before)
