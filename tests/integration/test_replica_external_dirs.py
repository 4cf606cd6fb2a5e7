"""Replicas of one source database in one target metastore keep their external data apart.

Each replica database puts external tables below its own directory, ``<target warehouse>/_external/<replica
db>/<source path>``: a load into one replica never adds, links over or removes a file another replica's
readers list (a one-file append used to be renamed into a directory both replicas named, so the other
replica showed a file its own position never had). A dropped external table's or partition's directory is
retired like a managed one's, and replicas of the older shared layout move into their own directory on
their next load.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.cli import main
from hmsrepl.config import MetastoreConfig
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import list_data_files
from hmsrepl.metastore.model import Database, TableType
from hmsrepl.metastore.protection import privileged
from hmsrepl.replication import load as load_module
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.leftovers import RETIRE_GRACE_ENV, cleanup_database
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.locations import EXTERNAL_DIR, EXTERNAL_ROOT, legacy_external_root
from hmsrepl.replication.replica_layout import ExternalRootConflictError, owned_external_root
from hmsrepl.replication.source_roots import SourceRoots
from hmsrepl.replication.verify import capture_state, verify
from hmsrepl.storage.base import filesystem_for, relative_to
from hmsrepl.storage.rooted import RootedFileSystem
from tests.helpers import make_partition, make_table, settle, side_args, write_file

DB, A, B = "extdb", "extdb_dr", "extdb_dr2"


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Metastore]:
    """A source whose external tables live outside its warehouse, below ``<tmp>/ext``."""
    store = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/source.db",
            warehouse=str(tmp_path / "src_wh"),
            cmroot=str(tmp_path / "src_cm"),
            external_roots=[str(tmp_path / "ext")],
        )
    )
    yield store
    store.close()


@pytest.fixture
def engine(source: Metastore, target: Metastore, tmp_path: Path) -> ReplicationEngine:
    roots = SourceRoots.from_settings(source.config.warehouse, source.config.cmroot, str(tmp_path / "ext"))
    return ReplicationEngine(str(tmp_path / "dumps"), source, target, source_roots=roots)


def external_table(name: str, location: Path, *keys: str):
    table = make_table(DB, name, partition_keys=keys).model_copy(
        update={"table_type": TableType.EXTERNAL_TABLE}
    )
    return table.model_copy(update={"sd": table.sd.model_copy(update={"location": str(location)})})


def seed(source: Metastore, tmp_path: Path) -> None:
    """``e1`` (external, partitioned by ``d``, partitions 0 and 1) and ``e2`` (external, unpartitioned)."""
    catalog = source.catalog
    catalog.create_database(Database(name=DB))
    e1 = catalog.create_table(external_table("e1", tmp_path / "ext" / "e1", "d"))
    for day in ("0", "1"):
        [part] = catalog.add_partitions(DB, "e1", [make_partition(e1, day)])
        write_file(part.sd.location, f"f{day}.parquet", f"rows of {day}".encode())
        catalog.insert(DB, "e1", [day])
    e2 = catalog.create_table(external_table("e2", tmp_path / "ext" / "e2"))
    write_file(e2.sd.location, "000000_0", b"a,1\n")
    catalog.insert(DB, "e2")


def load(engine: ReplicationEngine, replica: str) -> None:
    """One dump from the replica's position (a bootstrap for a new replica) and its load."""
    last = engine.execute(f"REPL STATUS {replica}")
    dumped = engine.execute(f"REPL DUMP {DB}" + (f" FROM {last}" if last is not None else ""))
    engine.execute(f"REPL LOAD {replica} FROM '{dumped.dump_dir}'")


def read_view(store: Metastore, db: str) -> tuple[object, ...]:
    """What a reader of the replica sees: its position, every table's and partition's location and the
    content of every file there, read the way a query engine reads (metadata, then listings)."""
    catalog = store.catalog
    tables = []
    for name in sorted(catalog.get_tables(db)):
        table = catalog.get_table(db, name)
        parts = []
        if table.partition_keys:
            for part in catalog.get_partitions(db, name):
                name_of = make_partition_name(table.partition_key_names, part.values)
                parts.append((name_of, part.sd.location, contents(part.sd.location)))
        tables.append((name, table.sd.location, tuple(sorted(parts)), contents(table.sd.location)))
    return repl_status(store, db), tuple(tables)


def contents(location: str | None) -> tuple[tuple[str, bytes], ...]:
    if not location or not filesystem_for(location).exists(location):
        return ()
    fs = filesystem_for(location)
    out = []
    for status in list_data_files(RootedFileSystem([location], purpose="test"), location):
        with fs.open_read(status.uri) as stream:
            out.append((relative_to(status.uri, location), stream.read()))
    return tuple(sorted(out))


def tree_hashes(*roots: Path) -> dict[str, str]:
    """Every file below the roots (hidden ones too), by path: its SHA-256."""
    out = {}
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(dirpath, name)
                out[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def all_files(root: Path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files)


def change_source(source: Metastore, tmp_path: Path) -> None:
    """A one-file append to ``e1/d=0`` (published in place), a new partition, an overwrite of ``e2``."""
    catalog = source.catalog
    settle()
    d0 = catalog.get_partition(DB, "e1", ["0"])
    new = write_file(d0.sd.location, "f0-b.parquet", b"more rows of 0")
    catalog.insert(DB, "e1", ["0"], new_files=[new])
    e1 = catalog.get_table(DB, "e1")
    [d2] = catalog.add_partitions(DB, "e1", [make_partition(e1, "2")])
    write_file(d2.sd.location, "f2.parquet", b"rows of 2")
    catalog.insert(DB, "e1", ["2"])
    e2 = catalog.get_table(DB, "e2")
    replaced = write_file(e2.sd.location, "000001_0", b"b,2\n")
    catalog.insert(DB, "e2", new_files=[replaced], replace=True)


def test_a_load_into_one_replica_changes_nothing_of_another(
    engine: ReplicationEngine, source: Metastore, target: Metastore, tmp_path: Path
) -> None:
    seed(source, tmp_path)
    load(engine, A)
    load(engine, B)
    wh = Path(target.config.warehouse)
    for replica in (A, B):
        own = owned_external_root(target, replica)
        assert own == str(wh / EXTERNAL_DIR / replica)
        for name in ("e1", "e2"):
            assert target.catalog.get_table(replica, name).sd.location.startswith(own + "/")
    change_source(source, tmp_path)
    b_dirs = (wh / EXTERNAL_DIR / B, wh / f"{B}.db")
    b_files = tree_hashes(*b_dirs)
    b_view = read_view(target, B)
    samples: list[object] = []
    errors: list[str] = []
    loading = threading.Event()
    loading.set()

    def sampler() -> None:
        while loading.is_set() or not samples:
            try:
                samples.append(read_view(target, B))
            except Exception as exc:  # a location vanishing under the reader is a change too
                errors.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    try:
        load(engine, A)
    finally:
        loading.clear()
        thread.join(timeout=60)
    assert errors == []
    assert samples and all(sample == b_view for sample in samples)
    assert tree_hashes(*b_dirs) == b_files  # not one byte of B's changed, nothing added or removed
    assert read_view(target, B) == b_view
    assert verify(source, DB, target, A) == []
    assert verify(source, DB, target, B) != []  # B is still at its older position
    load(engine, B)
    assert verify(source, DB, target, B) == []
    # Each replica's external data is below its own directory only.
    assert sorted(os.listdir(wh / EXTERNAL_DIR)) == [A, B]


def test_a_dropped_external_partition_and_table_leave_nothing_under_external(
    engine: ReplicationEngine, source: Metastore, target: Metastore, tmp_path: Path
) -> None:
    seed(source, tmp_path)
    load(engine, A)
    own = Path(owned_external_root(target, A) or "")
    d1 = target.catalog.get_partition(A, "e1", ["1"]).sd.location
    e2 = target.catalog.get_table(A, "e2").sd.location
    change_source(source, tmp_path)  # a new version of e1/d=0 and of e2: their old versions are retired too
    source.catalog.drop_partitions(DB, "e1", [["1"]], delete_data=False)
    load(engine, A)
    assert verify(source, DB, target, A) == []
    assert not filesystem_for(d1).exists(d1)
    left = all_files(own)
    kept = {
        relative_to(s.uri, str(own))
        for name in ("e1", "e2")
        for location in locations_of(target, A, name)
        for s in list_data_files(RootedFileSystem([location], purpose="test"), location)
    }
    assert left == sorted(kept)  # only what metadata names: no old version, no dropped partition
    source.catalog.drop_table(DB, "e2", delete_data=False)
    source.catalog.drop_table(DB, "e1", delete_data=False)
    load(engine, A)
    assert verify(source, DB, target, A) == []
    assert not filesystem_for(e2).exists(e2)
    assert all_files(Path(target.config.warehouse) / EXTERNAL_DIR) == []
    assert not any(name.startswith("e") for name in os.listdir(own)) if own.exists() else True


def named_hashes(store: Metastore, db: str) -> dict[str, str]:
    """Every file below the locations the replica's metadata names (hidden ones too): its SHA-256."""
    locations = [loc for name in store.catalog.get_tables(db) for loc in locations_of(store, db, name)]
    return tree_hashes(*(Path(loc) for loc in locations))


def locations_of(store: Metastore, db: str, name: str) -> list[str]:
    table = store.catalog.get_table(db, name)
    if not table.partition_keys:
        return [table.sd.location or ""]
    return [p.sd.location or "" for p in store.catalog.get_partitions(db, name)]


# -- replicas of the shared layout ----------------------------------------------------------------------------
def forget_external_root(target: Metastore, replica: str) -> None:
    with privileged("test: a replica made before per-replica external directories"):
        db = target.catalog.get_database(replica)
        params = {k: v for k, v in db.parameters.items() if k != EXTERNAL_ROOT}
        target.catalog.alter_database(replica, db.model_copy(update={"parameters": params}))


class Legacy:
    """Loads that behave as before per-replica directories (shared ``_external`` tree, nothing recorded)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, engine: ReplicationEngine, target: Metastore) -> None:
        self.monkeypatch, self.engine, self.target = monkeypatch, engine, target

    def load(self, replica: str) -> None:
        shared = legacy_external_root(self.target.config.warehouse)
        with self.monkeypatch.context() as patch:
            patch.setattr(load_module, "external_root_for", lambda store, db: shared)
            patch.setattr(load_module, "check_before_load", lambda *args: None)
            patch.setattr(load_module, "needs_move", lambda *args: False)
            load(self.engine, replica)
        forget_external_root(self.target, replica)


def test_replicas_of_the_shared_layout_move_to_their_own_directories_on_their_next_load(
    engine: ReplicationEngine,
    source: Metastore,
    target: Metastore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed(source, tmp_path)
    legacy = Legacy(monkeypatch, engine, target)
    legacy.load(A)
    legacy.load(B)
    wh = Path(target.config.warehouse)
    shared = legacy_external_root(target.config.warehouse)
    a_part = target.catalog.get_partition(A, "e1", ["0"]).sd.location
    assert a_part == target.catalog.get_partition(B, "e1", ["0"]).sd.location  # one directory, two replicas
    assert a_part.startswith(shared + "/") and owned_external_root(target, A) is None
    a_state = capture_state(target, A)
    change_source(source, tmp_path)
    legacy.load(B)  # B's one-file append lands in the directory A names too: the bug being fixed
    assert capture_state(target, A) != a_state
    # A's next load moves it first, carrying only the files its own record lists (not B's append).
    last = engine.execute(f"REPL STATUS {A}")
    position = repl_status(target, A)
    dumped = engine.execute(f"REPL DUMP {DB} FROM {last} TO {last}")
    b_files = named_hashes(target, B)
    b_view = read_view(target, B)
    engine.execute(f"REPL LOAD {A} FROM '{dumped.dump_dir}'")
    assert repl_status(target, A) == position
    own = owned_external_root(target, A)
    assert own == str(wh / EXTERNAL_DIR / A)
    for location in (*locations_of(target, A, "e1"), *locations_of(target, A, "e2")):
        assert location.startswith(own + "/")
    assert capture_state(target, A) == a_state  # exactly its own position's files again
    assert read_view(target, B) == b_view  # B, still of the shared layout, is untouched
    assert named_hashes(target, B) == b_files
    load(engine, A)
    assert verify(source, DB, target, A) == []
    load(engine, B)  # B moves too; the shared tree is then empty: nothing names it
    assert verify(source, DB, target, B) == []
    assert owned_external_root(target, B) == str(wh / EXTERNAL_DIR / B)
    assert sorted(os.listdir(wh / EXTERNAL_DIR)) == [A, B]
    assert verify(source, DB, target, A) == []


def test_a_replica_whose_directory_holds_another_replicas_shared_layout_data_is_refused(
    engine: ReplicationEngine,
    source: Metastore,
    target: Metastore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shared-layout replica whose source path starts with a replica's name (``/extdb_dr/...``) lies in
    that replica's own directory: the replica is refused, naming the other one to load first."""
    seed(source, tmp_path)
    # e3's source path starts with ``<tmp>/ext``; name the replica after that path's first segment.
    first = str(tmp_path / "ext").lstrip("/").split("/", 1)[0]
    legacy = Legacy(monkeypatch, engine, target)
    legacy.load(A)
    before = tree_hashes(Path(target.config.warehouse))
    with pytest.raises(ExternalRootConflictError, match=f"load '{A}' first"):
        load(engine, first)
    dumped = engine.execute(f"REPL DUMP {DB}")
    roots = ["--source-warehouse", source.config.warehouse, "--source-cmroot", source.config.cmroot]
    roots += ["--source-external-roots", str(tmp_path / "ext")]
    command = f"REPL LOAD {first} FROM '{dumped.dump_dir}'"
    refused = CliRunner().invoke(main, ["repl", "run", command, *side_args("target", target), *roots])
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert f"replica '{first}'" in refused.output and f"load '{A}' first" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    assert tree_hashes(Path(target.config.warehouse)) == before
    assert first not in target.catalog.get_databases()
    load(engine, A)  # A moves out of the shared layout
    load(engine, first)
    assert verify(source, DB, target, first) == []


def test_cleanup_sweeps_the_replicas_own_external_directory_only(
    engine: ReplicationEngine, source: Metastore, target: Metastore, tmp_path: Path
) -> None:
    """``repl cleanup`` removes what no metadata names below the replica's external root too, and nothing
    of another replica's."""
    seed(source, tmp_path)
    load(engine, A)
    load(engine, B)
    own = Path(owned_external_root(target, A) or "")
    d0 = Path(target.catalog.get_partition(A, "e1", ["0"]).sd.location)
    stray = [own / "stray.parquet", d0.parent / "d=9.hmsrepl-v3" / "f.parquet", d0 / ".hmsrepl-staging-x"]
    for path in stray:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"left behind")
    b_files = named_hashes(target, B)
    a_files = named_hashes(target, A)
    assert cleanup_database(target, A).swept_files == len(stray)
    assert not any(path.exists() for path in stray)
    assert not (d0.parent / "d=9.hmsrepl-v3").exists()
    assert named_hashes(target, A) == {p: h for p, h in a_files.items() if Path(p) not in stray}
    assert named_hashes(target, B) == b_files
    assert verify(source, DB, target, A) == []


def test_cleanup_leaves_external_versions_awaiting_their_grace_period(
    engine: ReplicationEngine,
    source: Metastore,
    target: Metastore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replaced external version readers may still list waits in its ticket; a sweep leaves it alone."""
    monkeypatch.setenv(RETIRE_GRACE_ENV, "3600")
    seed(source, tmp_path)
    load(engine, A)
    old = target.catalog.get_table(A, "e2").sd.location
    change_source(source, tmp_path)  # e2 overwritten: a new version, the old one retired after the grace
    load(engine, A)
    assert target.catalog.get_table(A, "e2").sd.location != old
    cleanup_database(target, A)
    assert contents(old) == ((("000000_0", b"a,1\n"),))
    monkeypatch.setenv(RETIRE_GRACE_ENV, "0")
    monkeypatch.setattr(time, "time", lambda: 10_000_000_000.0)  # long past every ticket's due time
    cleanup_database(target, A)
    assert not Path(old).exists()
    assert verify(source, DB, target, A) == []
