"""An Iceberg table's metadata cannot lead a replication load outside the table's location.

``metadata_location`` and the paths inside the metadata come from clients (and, in a dump, from whoever can
write the dump root). Attacked three ways, each on a replica on SQLite and PostgreSQL:

- a client stores ``metadata_location = <table location>/../../../elsewhere/conf.json``: the metastore
  refuses it (create and alter) with one line, and a later REPL DUMP + LOAD touches nothing outside;
- a crafted dump names such a ``metadata_location`` for a table pyiceberg wrote: dump validation refuses
  it, and the load's Iceberg rewrite refuses it too when validation is bypassed;
- metadata written by hand inside the table's directory names manifest lists outside it (by ``..`` and by
  a ``location`` of its own): the load refuses before it reads them.

Every time, the files outside the roots (hashed, modes included), the replica's catalog rows and files and
its notification log are unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as h2
from pyiceberg.catalog.hive import HiveCatalog

from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore import Metastore
from hmsrepl.replication import dump_snapshot_checks
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.dump_events import edit_event
from tests.integration.test_iceberg_replication import SCHEMA, rows
from tests.security.untouched import Untouched
from tests.servers import Hive2Client, RunningMetastore, metastore_server

REFUSED = (h2.InvalidObjectException, h2.MetaException, h2.InvalidOperationException)


@contextmanager
def _store(server: RunningMetastore) -> Iterator[Metastore]:
    store = Metastore.open(server.config)
    try:
        yield store
    finally:
        store.close()


class Scene:
    """A pyiceberg table ``ice.events`` on a source server, replicated once into ``ice_dr`` on a replica
    server, and a directory ``elsewhere`` outside every root holding a JSON file and a secret."""

    def __init__(self, root: Path, source: RunningMetastore, target: RunningMetastore) -> None:
        self.root, self.source, self.target = root, source, target
        self.elsewhere = root / "elsewhere"
        self.elsewhere.mkdir()
        (self.elsewhere / "conf.json").write_text(json.dumps({"location": "/", "secret": "s3cr3t"}))
        (self.elsewhere / "conf.json").chmod(0o644)
        (self.elsewhere / "secret.avro").write_bytes(b"not an Avro file, and not the metastore's")
        self.catalog = HiveCatalog("hms", uri=source.uri, **{"lock-check-min-wait-time": "0.05"})
        self.catalog.create_namespace("ice")
        self.table = self.catalog.create_table("ice.events", SCHEMA)
        self.table.append(rows([1, 2]))
        self.replicate()

    @property
    def location(self) -> str:
        with _store(self.source) as src:
            return src.catalog.get_table("ice", "events").sd.location or ""

    def escaping(self, name: str) -> str:
        """``<table location>/../../..`` up to the scene root, then ``elsewhere/<name>``."""
        up = os.path.relpath(self.elsewhere / name, local_path(self.location))
        assert up.startswith("../"), up
        return f"{self.location.rstrip('/')}/{up}"

    def dump(self) -> str:
        with _store(self.source) as src, _store(self.target) as dst:
            last = repl_status(dst, "ice_dr")
            engine = ReplicationEngine(str(self.root / "dumps"), src, dst)
            return engine.execute("REPL DUMP ice" + (f" FROM {last}" if last is not None else "")).dump_dir

    def load(self, dump_dir: str) -> None:
        with _store(self.source) as src, _store(self.target) as dst:
            ReplicationEngine(str(self.root / "dumps"), src, dst).execute(
                f"REPL LOAD ice_dr FROM '{dump_dir}'"
            )

    def replicate(self) -> None:
        self.load(self.dump())

    def guarded(self) -> list[Path | str]:
        return [self.elsewhere, self.target.warehouse, self.target.cmroot]

    def assert_load_refused(self, dump_dir: str, *fragments: str, replica_files: bool = True) -> str:
        """The load fails with a one-line error; nothing outside, in the replica's rows or log changes
        (nor its files, unless ``replica_files`` is False: a load stopped in its Iceberg rewrite leaves the
        copies it verified in a version directory that no row names, for the next run)."""
        guarded = self.guarded() if replica_files else [self.elsewhere]
        with _store(self.target) as dst:
            before = Untouched.take(guarded, [dst])
        with pytest.raises(HmsReplError) as info:
            self.load(dump_dir)
        message = str(info.value)
        assert "\n" not in message, message
        for fragment in fragments:
            assert fragment in message, message
        with _store(self.target) as dst:
            before.assert_same(guarded, [dst])
        return message


@pytest.fixture(params=["sqlite", "postgres"])
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scene]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    with (
        temporary_database("sqlite", str(tmp_path / "src")) as src_url,
        metastore_server(tmp_path / "src", src_url) as source,
        temporary_database(request.param, str(tmp_path / "dst")) as dst_url,
        metastore_server(tmp_path / "dst", dst_url) as target,
    ):
        yield Scene(tmp_path, source, target)


def _refused(call: Callable[..., Any], *args: Any) -> str:
    with pytest.raises(REFUSED) as info:
        call(*args)
    message = info.value.message
    assert "\n" not in message and "Traceback" not in message, message
    assert "metadata_location" in message and "not below the table's location" in message, message
    return message


def test_a_client_cannot_store_metadata_outside_the_table(scene: Scene) -> None:
    client = Hive2Client(scene.source.port, timeout_ms=60_000, user="mallory")
    try:
        with _store(scene.source) as src:
            before = Untouched.take([scene.elsewhere, scene.source.warehouse], [src])
        table = client.get_table("ice", "events")
        table.parameters = {**table.parameters, "metadata_location": scene.escaping("conf.json")}
        _refused(client.alter_table, "ice", "events", table)
        table.tableName = "copy"
        _refused(client.create_table, table)
        sideways = f"{scene.location.rstrip('/')}/../events-other/metadata/00001.metadata.json"
        table.parameters = {**table.parameters, "metadata_location": sideways}
        _refused(client.create_table, table)
        with _store(scene.source) as src:
            before.assert_same([scene.elsewhere, scene.source.warehouse], [src])
    finally:
        client.close()
    # pyiceberg's own commits (metadata below <location>/metadata/) still go through and replicate.
    scene.table.append(rows([3]))
    files = Untouched.take([scene.elsewhere], [])
    scene.replicate()
    files.assert_same([scene.elsewhere], [])


def _with_escaping_metadata(scene: Scene) -> str:
    """An incremental dump of a pyiceberg append whose ALTER_TABLE names the escaping metadata location."""
    scene.table.append(rows([3]))
    dump_dir = scene.dump()

    def escape(doc: dict[str, Any]) -> None:
        doc["message"]["after"]["parameters"]["metadata_location"] = scene.escaping("conf.json")

    edit_event(dump_dir, "ALTER_TABLE", escape)
    return dump_dir


def test_a_crafted_dump_naming_metadata_outside_the_table_is_refused(scene: Scene) -> None:
    dump_dir = _with_escaping_metadata(scene)
    scene.assert_load_refused(dump_dir, "metadata_location", "not below the table's location")


def test_the_load_refuses_it_even_past_dump_validation(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    dump_dir = _with_escaping_metadata(scene)
    monkeypatch.setattr(dump_snapshot_checks, "metadata_refusal", lambda *args: None)
    scene.assert_load_refused(dump_dir, "not below", replica_files=False)


@pytest.mark.parametrize("how", ["dot-dot", "own-location"])
def test_hand_written_metadata_naming_files_outside_the_table_is_refused(scene: Scene, how: str) -> None:
    """A client writes a metadata JSON into the table's own metadata directory (where the metastore lets
    ``metadata_location`` point) whose snapshot names a manifest list outside the table."""
    location = scene.location.rstrip("/")
    with _store(scene.source) as src:
        current = src.catalog.get_table("ice", "events")
        doc = json.loads(Path(local_path(current.parameters["metadata_location"])).read_text())
        outside = str(scene.elsewhere / "secret.avro")
        if how == "dot-dot":
            up = os.path.relpath(outside, local_path(location))
            doc["snapshots"][-1]["manifest-list"] = f"{location}/metadata/../{up}"
        else:  # the metadata's own "location" is the root: every path is "below" it
            doc["location"] = "file:/"
            doc["snapshots"][-1]["manifest-list"] = f"file:{outside}"
        crafted = f"{location}/metadata/99999-crafted.metadata.json"
        Path(local_path(crafted)).write_text(json.dumps(doc))
        params = {**current.parameters, "metadata_location": crafted}
        src.catalog.alter_table("ice", "events", current.model_copy(update={"parameters": params}))
    scene.assert_load_refused(scene.dump(), "outside its location", replica_files=False)
