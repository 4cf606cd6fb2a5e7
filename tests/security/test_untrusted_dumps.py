"""A dump is untrusted input: tampered dumps are refused by ``hmsrepl repl run`` with one clear line, and the
target (its metastore and every file on the machine) is exactly as it was.

Each attack edits a copy of a real dump (bootstrap, then incremental) written from a real source metastore.
Before and after the load, every file under the test's directory except the dumps (source warehouse and
cmroot, target warehouse and cmroot, the victim's files outside all roots) is hashed, and the target
metastore's catalog is captured through its API: both must be unchanged, the replica's ``repl.last.id``
included, and the load's ``repl_metrics`` row must end ``failed``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hmsrepl.config import MetastoreConfig
from hmsrepl.formats.paths import InvalidPathError, canonical_uri, child_name, is_below
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, TableType
from hmsrepl.replication.dump_checks import DumpValidationError, check_file_entry
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.metrics import MetricsLog
from hmsrepl.replication.source_roots import SourceRoots
from hmsrepl.replication.verify import verify
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import local_path
from tests import python_forks
from tests.dump_events import edit_event
from tests.helpers import (
    edit_dumped_partition,
    make_partition,
    make_table,
    open_replica,
    open_sqlite_source,
    write_file,
)

REPO = Path(__file__).resolve().parents[2]
SECRET = b"the victim's private data, outside every root"


# -- the scene: a source, a replica, a victim outside every root -----------------------------------------------
@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    source = open_sqlite_source(tmp_path)
    target = open_replica(f"sqlite:///{tmp_path}/target.db", tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_bytes(SECRET)
    (victim / "keep.dat").write_bytes(b"must never be overwritten or moved")
    scene = Scene(tmp_path, source, target, ReplicationEngine(str(tmp_path / "dumps"), source, target))
    seed(source)
    yield scene
    source.close()
    target.close()


class Scene:
    def __init__(self, root: Path, source: Metastore, target: Metastore, engine: ReplicationEngine) -> None:
        self.root, self.source, self.target, self.engine = root, source, target, engine
        self.victim = root / "victim"
        self.copies = 0

    def tampered(self, dump_dir: str, edit: Callable[[Path], None]) -> str:
        """A copy of a real dump, edited by ``edit(copy directory)``."""
        self.copies += 1
        copy = self.root / "dumps" / f"tampered-{self.copies}"
        shutil.copytree(local_path(dump_dir), copy)
        edit(copy)
        return str(copy)

    def cli_load(self, dump_dir: str, **env: str) -> subprocess.CompletedProcess[str]:
        source, target = self.source.config, self.target.config
        return python_forks.run_cli(
            [
                *("repl", "run", f"REPL LOAD sales_dr FROM '{dump_dir}'"),
                *("--target-db-url", target.db_url, "--target-warehouse", target.warehouse),
                *("--target-cmroot", target.cmroot),
                *("--source-warehouse", source.warehouse, "--source-cmroot", source.cmroot),
            ],
            {**_clean_env(), "PYTHONPATH": python_forks.PYTHONPATH, **env},
            timeout=120,
        )

    def files(self) -> dict[str, str]:
        """sha256 of every file under the scene but the dumps and the metastore databases themselves."""
        out = {}
        for dirpath, _, names in os.walk(self.root):
            if Path(dirpath).is_relative_to(self.root / "dumps"):
                continue
            for name in names:
                path = Path(dirpath) / name
                if path.suffix in (".db", ".db-journal", ".db-wal", ".db-shm"):
                    continue
                out[str(path.relative_to(self.root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        return out

    def catalog(self) -> dict[str, Any]:
        """The target metastore as a client sees it: every database, table, partition, function, and the
        notification log's position (a change would have logged an event)."""
        catalog = self.target.catalog
        state: dict[str, Any] = {"event_id": self.target.get_current_notification_event_id()}
        for db in catalog.get_databases():
            state[db] = {
                "database": catalog.get_database(db).model_dump(),
                "functions": sorted(catalog.get_functions(db)),
                "tables": {
                    name: (
                        catalog.get_table(db, name).model_dump(),
                        [p.model_dump() for p in catalog.get_partitions(db, name)],
                    )
                    for name in catalog.get_tables(db)
                },
            }
        return state

    def assert_refused(self, dump_dir: str, *expected: str, **env: str) -> str:
        """Run the load; it must fail with one clear line naming ``expected`` and change nothing."""
        files, catalog, position = self.files(), self.catalog(), repl_status(self.target, "sales_dr")
        done = self.cli_load(dump_dir, **env)
        assert done.returncode != 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        for text in expected:
            assert text in lines[0], lines[0]
        assert self.files() == files, "files changed outside the refused load"
        assert self.catalog() == catalog, "the target metastore changed"
        assert repl_status(self.target, "sales_dr") == position
        row = MetricsLog(self.target.engine).list(operation="load", limit=1)[0]
        assert row.status == "failed" and row.error and row.error.startswith("Dump"), row
        return lines[0]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("HMSREPL_") and k != "PYTHONPATH"}


def seed(source: Metastore) -> None:
    catalog = source.catalog
    catalog.create_database(Database(name="sales"))
    orders = catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    for day in ("d1", "d2"):
        [part] = catalog.add_partitions("sales", "orders", [make_partition(orders, day)])
        write_file(part.sd.location, f"part-{day}.parquet", f"rows of {day}".encode())
        catalog.insert("sales", "orders", [day])
    plain = catalog.create_table(make_table("sales", "plain"))
    write_file(plain.sd.location, "000000_0", b"a,1\nb,2\n")
    catalog.insert("sales", "plain")


# -- editing helpers --------------------------------------------------------------------------------------------
def edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    body = json.loads(path.read_text())
    change(body)
    path.write_text(json.dumps(body))


def edit_files(path: Path, change: Callable[[list[str]], list[str]]) -> None:
    path.write_text("".join(f"{line}\n" for line in change(path.read_text().splitlines())))


def parts(encoded: str) -> list[str]:
    return [*encoded.split("#"), "", "", ""][:4]


def forged(checksum: str) -> str:
    """Another well-formed checksum for a file of the same size (``crc32c-<8 hex>-<size>``)."""
    _, digest, size = checksum.split("-")
    return f"crc32c-{int(digest, 16) ^ 0xFFFFFFFF:08x}-{size}"


def tamper_added(doc: dict[str, Any], change: Callable[[list[str]], str]) -> None:
    """Change the one file a data event adds: in its message's data change and in its files alike."""
    data = doc["message"]["data"]
    data.update(added=[change(parts(data["added"][0]))])
    doc["files"] = [change(parts(doc["files"][0]))]


# -- bootstrap dumps --------------------------------------------------------------------------------------------
def bootstrap_attacks(
    scene: Scene,
) -> dict[str, tuple[Callable[[Path], None], tuple[str, ...], dict[str, str]]]:
    secret = scene.victim / "secret.txt"
    secret_sum = checksum_bytes(SECRET)
    plain_files = Path("sales/plain/_files")

    def files_line(change: Callable[[list[str]], str]) -> Callable[[Path], None]:
        return lambda d: edit_files(d / plain_files, lambda lines: [change(parts(lines[0]))])

    def plain_location(location: Callable[[str], str]) -> Callable[[Path], None]:
        def edit(d: Path) -> None:
            edit_json(
                d / "sales/plain/_metadata",
                lambda b: b["table"]["sd"].update(location=location(b["table"]["sd"]["location"])),
            )

        return edit

    def partition_location(location: Callable[[str], str]) -> Callable[[Path], None]:
        def change(body: dict[str, Any], files: object) -> None:
            body["partition"]["sd"].update(location=location(body["partition"]["sd"]["location"]))

        return lambda d: edit_dumped_partition(d, "sales", "orders", "day=d1", change)

    return {
        "'..' in a _files uri (reads a foreign file into the replica)": (
            files_line(lambda p: f"{p[0]}/../../../victim/secret.txt#{secret_sum}#{p[2]}#"),
            ("sales/plain/_files", "'..' path segment"),
            {},
        ),
        "a foreign file with a matching checksum": (
            files_line(lambda p: f"{secret}#{secret_sum}#{p[2]}#"),
            ("secret.txt", "outside the source warehouse"),
            {},
        ),
        "'..' in a subdir (writes outside the target warehouse)": (
            files_line(lambda p: f"{p[0]}#{p[1]}#{p[2]}#../../../../victim"),
            ("subdir", "'..'"),
            {},
        ),
        "table location '/'": (plain_location(lambda _: "/"), ("table 'plain'", "location '/'"), {}),
        "table location '<db>/../../victim'": (
            plain_location(lambda loc: loc.rsplit("/", 1)[0] + "/../../victim"),
            ("table 'plain'", "'..' path segment"),
            {},
        ),
        "table location in another scheme": (
            plain_location(lambda _: "webhdfs://nn:8020/victim"),
            ("table 'plain'", "scheme webhdfs"),
            {},
        ),
        "table location on another file system (hdfs)": (
            plain_location(lambda _: "hdfs://nn:8020/victim"),
            ("table 'plain'", "hdfs://nn:8020/victim"),
            {},
        ),
        "empty checksum (would skip verification)": (
            files_line(lambda p: f"{p[0]}##{p[2]}#"),
            ("sales/plain/_files", "checksum ''", "crc32c-<8 hex>-<size>"),
            {},
        ),
        # Well formed, the right size, the wrong content: only reading the file finds it, and the table
        # ('plain') is loaded after 'orders': its copy is verified before the database is created.
        "a forged checksum on the second table": (
            files_line(lambda p: f"{p[0]}#{forged(p[1])}#{p[2]}#"),
            ("refused, nothing was applied", "000000_0", "the dump's checksum was edited"),
            {},
        ),
        # Which line would win? A load publishing a page at a time would copy and log the file twice.
        "a file listed twice, the second time with another checksum": (
            lambda d: edit_files(
                d / plain_files,
                lambda lines: [
                    lines[0],
                    "#".join([*parts(lines[0])[:1], forged(parts(lines[0])[1]), *parts(lines[0])[2:]]),
                ],
            ),
            ("sales/plain/_files", "names the file '000000_0' twice", "dump the object again"),
            {},
        ),
        "malformed checksum": (
            files_line(lambda p: f"{p[0]}#crc32c-0x1F-8#{p[2]}#"),
            ("checksum 'crc32c-0x1F-8'",),
            {},
        ),
        "cmroot outside the source cmroot": (
            files_line(lambda p: f"{p[0]}#{p[1]}#{scene.victim}#"),
            ("cmroot", "victim", "not the source cmroot"),
            {},
        ),
        "partition value with '/..'": (
            lambda d: edit_dumped_partition(
                d,
                "sales",
                "orders",
                "day=d1",
                lambda b, files: b["partition"].update(values=["d1/.."]),
            ),
            ("partition value 'd1/..'",),
            {},
        ),
        # Spelled as a child of the table's directory, and not one: the checks a plain child skips apply.
        "partition location '<table>/..' (its table's parent)": (
            partition_location(lambda loc: loc.rsplit("/", 1)[0] + "/.."),
            ("partition ['d1']", "'..' path segment"),
            {},
        ),
        # A table above its database's directory: its child there is no child of its mapping.
        "table at the source warehouse, a partition at the database's directory": (
            lambda d: (
                edit_json(
                    d / "sales/orders/_metadata",
                    lambda b: b["table"]["sd"].update(
                        location=b["table"]["sd"]["location"].rsplit("/", 2)[0]
                    ),
                ),
                partition_location(lambda loc: loc.rsplit("/", 2)[0])(d),
            ),
            ("partition ['d1']", "maps to the target database's own directory"),
            {},
        ),
        "partition location '<table>/<name>' with a control character": (
            partition_location(lambda loc: loc + "\x1b"),
            ("partition ['d1']", "control character"),
            {},
        ),
        "a partition value the catalog refuses (longer than Hive's 256 characters)": (
            lambda d: edit_dumped_partition(
                d,
                "sales",
                "orders",
                "day=d2",
                lambda b, files: b["partition"].update(values=["d" * 300]),
            ),
            ("for key 'day'", "is too long (300 characters); use at most 256"),
            {},
        ),
        "a table name with a path separator": (
            lambda d: edit_json(
                d / "sales/plain/_metadata", lambda b: b["table"].update(table_name="../plain")
            ),
            ("sales/plain/_metadata", "holds no snapshot of table 'plain'"),
            {},
        ),
        "oversized _metadata": (
            lambda d: edit_json(
                d / "sales/plain/_metadata", lambda b: b["table"]["parameters"].update(pad="x" * 10_000)
            ),
            ("larger than 8192 bytes", "HMSREPL_DUMP_MAX_METADATA_BYTES"),
            {"HMSREPL_DUMP_MAX_METADATA_BYTES": "8192"},
        ),
        "JSON nested 100,000 levels deep": (
            lambda d: (d / "sales/plain/_metadata").write_text("[" * 100_000 + "]" * 100_000),
            ("nests JSON deeper than 64 levels",),
            {},
        ),
    }


def test_tampered_bootstrap_dumps_are_refused_and_change_nothing(scene: Scene) -> None:
    dumped = scene.engine.execute("REPL DUMP sales")
    for name, (edit, expected, env) in bootstrap_attacks(scene).items():
        line = scene.assert_refused(scene.tampered(dumped.dump_dir, edit), *expected, **env)
        assert "refused" in line or "larger than" in line or "nests JSON" in line, (name, line)
        # nothing at all: no database, hence no bootstrap mark, and no file in the target warehouse
        assert "sales_dr" not in scene.target.catalog.get_databases(), name
        assert not (scene.root / "dst_wh").exists() or not any((scene.root / "dst_wh").rglob("*")), name
    # The untouched dump loads, and the replica equals the source: the checks refuse no real dump.
    done = scene.cli_load(dumped.dump_dir)
    assert done.returncode == 0, done.stderr
    assert verify(scene.source, "sales", scene.target, "sales_dr") == []


def test_a_symbolic_link_out_of_the_source_warehouse_is_not_followed(scene: Scene) -> None:
    """Paths that look contained can still lead out through a link planted in the source warehouse."""
    dumped = scene.engine.execute("REPL DUMP sales")
    plain = scene.root / "src_wh/sales.db/plain"
    (plain / "link").symlink_to(scene.victim / "secret.txt")
    secret_sum = checksum_bytes(SECRET)

    def name_the_link(d: Path) -> None:
        edit_files(
            d / "sales/plain/_files",
            lambda lines: [f"{parts(lines[0])[0].rsplit('/', 1)[0]}/link#{secret_sum}##"],
        )

    scene.assert_refused(scene.tampered(dumped.dump_dir, name_the_link), "link", "not a regular file")
    assert "sales_dr" not in scene.target.catalog.get_databases()


def test_tampered_incremental_dumps_are_refused_and_leave_the_replica_as_it_was(scene: Scene) -> None:
    first = scene.engine.execute("REPL DUMP sales")
    assert scene.cli_load(first.dump_dir).returncode == 0
    catalog = scene.source.catalog
    orders = catalog.get_table("sales", "orders")
    [d3] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d3")])
    write_file(d3.sd.location, "part-d3.parquet", b"rows of d3")
    catalog.insert("sales", "orders", ["d3"])
    fresh = catalog.create_table(make_table("sales", "fresh"))
    write_file(fresh.sd.location, "000000_0", b"fresh rows")
    catalog.insert("sales", "fresh")
    dumped = scene.engine.execute(f"REPL DUMP sales FROM {first.last_event_id}")
    secret_sum = checksum_bytes(SECRET)

    def insert_files(change: Callable[[list[str]], str]) -> Callable[[Path], None]:
        """Change the files the INSERT into 'fresh' adds (the message's data change and its _files alike)."""

        def edit(d: Path) -> None:
            edit_event(d, "INSERT", lambda doc: tamper_added(doc, change), 1)

        return edit

    def partition_location(d: Path) -> None:
        def change(body: dict[str, Any]) -> None:
            part = body["message"]["partitions"][0]
            part["sd"]["location"] = part["sd"]["location"].rsplit("/", 1)[0] + "/../../../victim"

        edit_event(d, "ADD_PARTITION", change)

    def repeated_event(d: Path) -> None:
        [segment] = sorted((d / "events").glob("*/_events"))
        first_line = segment.read_bytes().split(b"\n")[0]
        later = d / "events" / str(dumped.last_event_id + 1)
        later.mkdir()
        (later / "_events").write_bytes(first_line + b"\n")

    attacks = {
        "partition location '<table>/../../../victim'": (partition_location, ("ADD_PARTITION", "'..'")),
        "'..' in an event's file uri": (
            insert_files(lambda p: f"{p[0]}/../../../../victim/secret.txt#{secret_sum}#{p[2]}#"),
            ("INSERT", "'..' path segment"),
        ),
        "a foreign file in an event": (
            insert_files(lambda p: f"{scene.victim}/secret.txt#{secret_sum}#{p[2]}#"),
            ("INSERT", "outside the source warehouse"),
        ),
        "empty checksum in an event": (insert_files(lambda p: f"{p[0]}##{p[2]}#"), ("checksum ''",)),
        "a forged checksum on the second INSERT's file": (
            insert_files(lambda p: f"{p[0]}#{forged(p[1])}#{p[2]}#"),
            ("refused, nothing was applied", "000000_0", "the dump's checksum was edited"),
        ),
        "table created at '/'": (
            lambda d: edit_event(
                d,
                "CREATE_TABLE",
                lambda b: b["message"]["table"]["sd"].update(location="/"),
            ),
            ("CREATE_TABLE", "location '/'"),
        ),
        "table created at the replica database's own directory": (
            lambda d: edit_event(
                d,
                "CREATE_TABLE",
                lambda b: b["message"]["table"]["sd"].update(
                    location=b["message"]["table"]["sd"]["location"].rsplit("/", 1)[0]
                ),
            ),
            ("target database's own directory",),
        ),
        "an ADD_PARTITION without its partitions (would fail half-way)": (
            lambda d: edit_event(d, "ADD_PARTITION", lambda b: b["message"].pop("partitions")),
            ("ADD_PARTITION", "no valid 'partitions'"),
        ),
        "a table snapshot the catalog model rejects": (
            lambda d: edit_event(
                d,
                "CREATE_TABLE",
                lambda b: b["message"]["table"]["sd"].update(cols="not a list"),
            ),
            ("malformed table snapshot: sd.cols",),
        ),
        "an event type no load knows": (
            lambda d: edit_event(d, "CREATE_TABLE", lambda b: b.update(event_type="RM_RF")),
            ("event type 'RM_RF'",),
        ),
        "an event replayed again in a later segment": (repeated_event, ("out of order",)),
        # Validation remembers table snapshots that passed by content: the same table's snapshot, pointed
        # elsewhere in one event, is new content and checked again.
        "an ADD_PARTITION whose table snapshot sits at '/'": (
            lambda d: edit_event(
                d, "ADD_PARTITION", lambda b: b["message"]["table"]["sd"].update(location="/")
            ),
            ("ADD_PARTITION", "location '/'"),
        ),
        # Integers beyond 64 bits are read as floats (formats.json_text): refused where an id is wanted.
        "an event id beyond 64 bits": (
            lambda d: edit_event(d, "INSERT", lambda b: b.update(event_id=2**70)),
            ("holds event id", "not an integer"),
        ),
        "a file among the segments that is not a segment": (
            lambda d: write_file(str(d / "events" / "1"), "_metadata", b"{}"),
            ("'events/1/_metadata', which is not events/<event id>/_events",),
        ),
    }
    for _name, (edit, expected) in attacks.items():
        scene.assert_refused(scene.tampered(dumped.dump_dir, edit), *expected)
        assert (
            scene.target.catalog.get_database("sales_dr").parameters.get("hmsrepl.bootstrap.in.progress")
            is None
        )
    too_many = scene.assert_refused(dumped.dump_dir, "HMSREPL_DUMP_MAX_EVENTS", HMSREPL_DUMP_MAX_EVENTS="2")
    assert "events" in too_many
    done = scene.cli_load(dumped.dump_dir)
    assert done.returncode == 0, done.stderr
    assert verify(scene.source, "sales", scene.target, "sales_dr") == []


def test_a_load_without_configured_source_roots_is_refused(scene: Scene) -> None:
    """The dump's own roots are never a fallback: a load that cannot check them refuses and names the fix."""
    dumped = scene.engine.execute("REPL DUMP sales")
    target = scene.target.config
    done = python_forks.run_cli(
        [
            *("repl", "run", f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'"),
            *("--target-db-url", target.db_url, "--target-warehouse", target.warehouse),
            *("--target-cmroot", target.cmroot),
        ],
        {**_clean_env(), "PYTHONPATH": python_forks.PYTHONPATH},
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "HMSREPL_SOURCE_WAREHOUSE" in done.stderr and "HMSREPL_SOURCE_CMROOT" in done.stderr
    assert "sales_dr" not in scene.target.catalog.get_databases()


# -- the pure checks, on their own ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("/w/db/t", "/w/db/t"),
        ("file:/w/db/t/", "/w/db/t"),
        ("file:///w/db/t", "/w/db/t"),
        ("file://localhost/w/db/t", "/w/db/t"),
        ("s3a://bucket/w/p=k%3Av", "s3://bucket/w/p=k%3Av"),
        ("/w/%2E%2E/t", "/w/%2E%2E/t"),  # never URL-decoded: a directory named '%2E%2E'
    ],
)
def test_canonical_uri_normalises_spellings(uri: str, canonical: str) -> None:
    assert canonical_uri(uri) == canonical


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "w/db",
        "/w/../x",
        "/w/./x",
        "/w//x",
        "/w/x\x00",
        "/w/x\n",
        "webhdfs://nn/w",
        "hdfs:/nn/w",
        "hdfs://@nn/w",
        "hdfs://nn/w/../x",
        "file://evil/w",
        "s3://@b/k",
        "s3:bucket/k",
        "ftp://h/x",
    ],
)
def test_canonical_uri_refuses_what_could_escape(uri: str) -> None:
    with pytest.raises(InvalidPathError):
        canonical_uri(uri)


@given(
    parent=st.sampled_from(["/w/db/t", "s3://b/w/t", "hdfs://nn:8020/w/t", "/w/db/t/"]),
    tail=st.text(
        alphabet=st.sampled_from(["/", ".", "a", "=", "%", "\x00", "\n", "\u2028", "t"]), max_size=6
    ),
)
def test_a_plain_child_is_its_own_canonical_form(parent: str, tail: str) -> None:
    """``child_name`` spares the parse only where the parser would answer the same: the child's canonical
    form is itself, directly below its parent; anything else (dots, empty or nested names, control
    characters, a sibling sharing the parent's prefix, a parent not in canonical form) is left to it."""
    uri = parent + tail
    name = child_name(uri, parent)
    if name is not None:
        assert canonical_uri(uri) == uri == f"{parent}/{name}"
        assert is_below(uri, parent, strictly=True)
    assert child_name(f"{parent}/a", parent) == (None if parent.endswith("/") else "a")


def test_file_entries_are_checked_against_the_configured_roots_only() -> None:
    roots = SourceRoots("/src/wh", "/src/cm", ("s3://ext/data",))
    good = "/src/wh/db/t/delta_1/f#crc32c-0000000a-5#/src/cm#delta_1"
    assert check_file_entry(good, object_location="/src/wh/db/t", roots=roots).subdir == "delta_1"
    check_file_entry("s3a://ext/data/t/f#crc32c-0000000a-5##", object_location="s3://ext/data/t", roots=roots)
    for bad, why in [
        ("/src/wh2/db/t/f#crc32c-0000000a-5##", "outside"),  # a sibling sharing the prefix '/src/wh'
        ("/src/wh/db/u/f#crc32c-0000000a-5##", "not below its object's location"),
        ("/src/wh/db/t/f#CRC32C-0000000A-5##", "checksum"),
        ("/src/wh/db/t/f#crc32c-0000000a-05##", "checksum"),
        ("/src/wh/db/t/f#crc32c-0000000a-5#/src/cmx#", "not the source cmroot"),
        ("/src/wh/db/t/f#crc32c-0000000a-5##/abs", "relative"),
        ("/src/wh/db/t/f#crc32c-0000000a-5##x", "does not end with its subdir"),
        ("a#b#c#d#e#f", "malformed"),
    ]:
        with pytest.raises(InvalidPathError, match=why):
            check_file_entry(bad, object_location="/src/wh/db/t", roots=roots)


def test_configured_roots_must_be_clean_and_complete() -> None:
    with pytest.raises(DumpValidationError, match="HMSREPL_SOURCE_CMROOT"):
        SourceRoots.from_settings("/src/wh", None)
    with pytest.raises(DumpValidationError, match="fix the setting"):
        SourceRoots.from_settings("/src/../wh", "/src/cm")
    assert SourceRoots.from_settings("/w", "/c", " s3://a/x , /ext ").external == ("s3://a/x", "/ext")


# -- S3 ------------------------------------------------------------------------------------------------------------
def test_an_s3_dump_naming_another_bucket_is_refused(tmp_path: Path, s3_env: object, s3_client: Any) -> None:
    from tests.s3server import create_bucket, new_bucket_name

    src, victim = (create_bucket(s3_client, new_bucket_name(p), versioned=False) for p in ("src", "victim"))
    s3_client.put_object(Bucket=victim, Key="secret", Body=SECRET)
    source = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/source.db",
            warehouse=f"s3://{src}/wh",
            cmroot=f"s3://{src}/cm",
            trash_root="",
        )
    )
    target = open_replica(f"sqlite:///{tmp_path}/target.db", tmp_path)
    try:
        source.catalog.create_database(Database(name="sales"))
        plain = source.catalog.create_table(make_table("sales", "plain"))
        s3_client.put_object(Bucket=src, Key=plain.sd.location.split("/", 3)[3] + "/000000_0", Body=b"rows")
        source.catalog.insert("sales", "plain")
        engine = ReplicationEngine(f"s3://{src}/repl", source, target)
        dumped = engine.execute("REPL DUMP sales")
        dump = DumpDir(dumped.dump_dir)
        [line] = dump.read_files("sales/plain/_files")
        forged = f"s3://{victim}/secret#{checksum_bytes(SECRET)}#{parts(line)[2]}#"
        dump.write_files("sales/plain/_files", [forged])
        with pytest.raises(
            DumpValidationError, match=f"'s3://{victim}/secret' is outside the source warehouse"
        ):
            engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
        assert "sales_dr" not in target.catalog.get_databases()
        assert not (tmp_path / "dst_wh").exists() or not any((tmp_path / "dst_wh").rglob("*"))
        assert MetricsLog(target.engine).list(operation="load", limit=1)[0].status == "failed"
        assert s3_client.get_object(Bucket=victim, Key="secret")["Body"].read() == SECRET
        dump.write_files("sales/plain/_files", [line])
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
        assert verify(source, "sales", target, "sales_dr") == []
    finally:
        source.close()
        target.close()


# -- signed dumps --------------------------------------------------------------------------------------------------
def test_a_load_with_a_signing_key_refuses_unsigned_and_altered_dumps(scene: Scene, monkeypatch) -> None:
    """Forged dumps with valid paths pass the path checks; a shared key (HMAC) catches them."""
    key = "k" * 32
    monkeypatch.setenv("HMSREPL_DUMP_SIGNING_KEY", key)
    dumped = scene.engine.execute("REPL DUMP sales")
    monkeypatch.delenv("HMSREPL_DUMP_SIGNING_KEY")
    assert (Path(dumped.dump_dir) / "_signature").is_file()
    signed = {"HMSREPL_DUMP_SIGNING_KEY": key}

    def drop_table_params(d: Path) -> None:  # a plausible edit: every path and checksum still valid
        edit_json(d / "sales/plain/_metadata", lambda b: b["table"]["parameters"].update(owner_note="forged"))

    def resign_with(other_key: str) -> Callable[[Path], None]:
        def edit(d: Path) -> None:
            from hmsrepl.replication import signing

            drop_table_params(d)
            signing.sign(DumpDir(str(d)), other_key.encode())

        return edit

    cases = {
        "changed": (drop_table_params, ("'sales/plain/_metadata' was changed after the dump was signed",)),
        "unsigned": (lambda d: (d / "_signature").unlink(), ("has no _signature",)),
        "added": (lambda d: (d / "sales/extra").write_text("x"), ("'sales/extra' was added",)),
        "removed": (lambda d: (d / "sales/plain/_files").unlink(), ("'sales/plain/_files' is missing",)),
        "signed with another key": (resign_with("o" * 32), ("does not verify",)),
    }
    for _name, (edit, expected) in cases.items():
        scene.assert_refused(scene.tampered(dumped.dump_dir, edit), *expected, **signed)
        assert "sales_dr" not in scene.target.catalog.get_databases()
    short = scene.cli_load(dumped.dump_dir, HMSREPL_DUMP_SIGNING_KEY="short")
    assert short.returncode != 0 and "at least 16 bytes" in short.stderr and "Traceback" not in short.stderr
    done = scene.cli_load(dumped.dump_dir, **signed)
    assert done.returncode == 0, done.stderr
    assert verify(scene.source, "sales", scene.target, "sales_dr") == []


def test_external_tables_load_only_from_configured_external_roots(scene: Scene) -> None:
    """Data outside the source warehouse is read only from roots the load's configuration trusts."""
    external = scene.root / "ext" / "events"
    table = make_table("sales", "ext_events").model_copy(update={"table_type": TableType.EXTERNAL_TABLE})
    table = table.model_copy(update={"sd": table.sd.model_copy(update={"location": str(external)})})
    # The source metastore itself must allow that external root (HMSREPL_EXTERNAL_ROOTS): its dump reads the
    # table's files through its own roots.
    config = scene.source.config.model_copy(update={"external_roots": [str(scene.root / "ext")]})
    source = Metastore(config)
    try:
        source.catalog.create_table(table)
        write_file(str(external), "e1", b"external rows")
        source.catalog.insert("sales", "ext_events")
        dumped = ReplicationEngine(str(scene.root / "dumps"), source, scene.target).execute("REPL DUMP sales")
        scene.assert_refused(dumped.dump_dir, "table 'ext_events'", "HMSREPL_SOURCE_EXTERNAL_ROOTS")
        done = scene.cli_load(dumped.dump_dir, HMSREPL_SOURCE_EXTERNAL_ROOTS=str(scene.root / "ext"))
        assert done.returncode == 0, done.stderr
        loaded = scene.target.catalog.get_table("sales_dr", "ext_events")
        assert loaded.sd.location.startswith(scene.target.config.warehouse)  # under <warehouse>/_external/
        assert verify(source, "sales", scene.target, "sales_dr") == []
    finally:
        source.close()


def test_a_tampered_one_file_append_into_a_replica_partition_writes_nothing(scene: Scene) -> None:
    """A one-file append is added in place, into the replica partition's live directory: a dump that makes
    the added file's path escape that directory is refused before anything is staged there."""
    first = scene.engine.execute("REPL DUMP sales")
    assert scene.cli_load(first.dump_dir).returncode == 0
    catalog = scene.source.catalog
    d1 = catalog.get_partition("sales", "orders", ["d1"])
    added = write_file(d1.sd.location, "part-d1-more.parquet", b"more rows of d1")
    catalog.insert("sales", "orders", ["d1"], new_files=[added])
    dumped = scene.engine.execute(f"REPL DUMP sales FROM {first.last_event_id}")
    secret_sum = checksum_bytes(SECRET)

    def appended(change: Callable[[list[str]], str]) -> Callable[[Path], None]:
        def edit(d: Path) -> None:
            edit_event(d, "INSERT", lambda doc: tamper_added(doc, change))

        return edit

    attacks = {
        "a subdirectory climbing out of the partition": (
            appended(lambda p: f"{p[0]}#{p[1]}#{p[2]}#../../../../victim"),
            "subdir '../../../../victim' has a '..' segment",
        ),
        "'..' in the appended file's uri": (
            appended(
                lambda p: f"{p[0].rsplit('/', 1)[0]}/../../../../victim/secret.txt#{secret_sum}#{p[2]}#"
            ),
            "has a '..' path segment",
        ),
    }
    for edit, expected in attacks.values():
        scene.assert_refused(scene.tampered(dumped.dump_dir, edit), "INSERT", expected)
    before = scene.target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.location
    done = scene.cli_load(dumped.dump_dir)
    assert done.returncode == 0, done.stderr
    assert scene.target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.location == before  # in place
    assert verify(scene.source, "sales", scene.target, "sales_dr") == []


def test_a_tampered_append_to_the_second_of_two_partitions_writes_nothing_into_either(scene: Scene) -> None:
    """Appends to two partitions of a table are added in place together, or not at all: a dump whose second
    append is tampered with is refused before the first partition's file is staged in its live directory."""
    first = scene.engine.execute("REPL DUMP sales")
    assert scene.cli_load(first.dump_dir).returncode == 0
    catalog = scene.source.catalog
    for day in ("d1", "d2"):
        part = catalog.get_partition("sales", "orders", [day])
        added = write_file(part.sd.location, f"part-{day}-more.parquet", f"more rows of {day}".encode())
        catalog.insert("sales", "orders", [day], new_files=[added])
    dumped = scene.engine.execute(f"REPL DUMP sales FROM {first.last_event_id}")

    def second(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
        def edit(d: Path) -> None:
            edit_event(d, "INSERT", change, nth=1)

        return edit

    def climbing(doc: dict[str, Any]) -> None:
        tamper_added(doc, lambda p: f"{p[0]}#{p[1]}#{p[2]}#../../../../victim")

    def one_more_file(doc: dict[str, Any]) -> None:
        doc["message"]["data"]["count"] += 1

    scene.assert_refused(scene.tampered(dumped.dump_dir, second(climbing)), "has a '..' segment")
    # A count that does not add up is found by the load itself (not by the dump's validation): it fails
    # before staging anything, leaving only its running mark, which the next load sweeps.
    files, catalog = scene.files(), scene.catalog()
    failed = scene.cli_load(scene.tampered(dumped.dump_dir, second(one_more_file)))
    assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
    [line] = failed.stderr.strip().splitlines()
    assert "d2" in line and "event is missing" in line, line
    running_marks = "/.hmsrepl-loads/"
    assert {k: v for k, v in scene.files().items() if running_marks not in f"/{k}"} == files
    assert scene.catalog() == catalog and repl_status(scene.target, "sales_dr") == first.last_event_id
    before = {
        day: scene.target.catalog.get_partition("sales_dr", "orders", [day]).sd.location
        for day in ("d1", "d2")
    }
    done = scene.cli_load(dumped.dump_dir)
    assert done.returncode == 0, done.stderr
    after = {
        day: scene.target.catalog.get_partition("sales_dr", "orders", [day]).sd.location for day in before
    }
    assert after == before  # both in place
    assert verify(scene.source, "sales", scene.target, "sales_dr") == []


def test_a_tampered_append_after_an_hour_rollover_leaves_the_replica_at_the_source_state_before_it(
    scene: Scene,
) -> None:
    """An hour rollover commits in parts (appends to d1, then d3 added, then d3's append): a dump whose
    last append is tampered with fails in its own part. The parts before it stay, each a state the source
    had; nothing else changes (every other file hashed the same) and the untampered dump then completes."""
    first = scene.engine.execute("REPL DUMP sales")
    assert scene.cli_load(first.dump_dir).returncode == 0
    catalog = scene.source.catalog
    d1 = catalog.get_partition("sales", "orders", ["d1"])
    write_file(d1.sd.location, "a1.parquet", b"late rows of d1")
    catalog.insert("sales", "orders", ["d1"], new_files=[f"{d1.sd.location}/a1.parquet"])
    orders = catalog.get_table("sales", "orders")
    write_file(f"{(orders.sd.location or '').rstrip('/')}/day=d3", "c0.parquet", b"first rows of d3")
    catalog.add_partitions("sales", "orders", [make_partition(orders, "d3")])
    d3 = catalog.get_partition("sales", "orders", ["d3"])
    write_file(d3.sd.location, "c1.parquet", b"more rows of d3")
    catalog.insert("sales", "orders", ["d3"], new_files=[f"{d3.sd.location}/c1.parquet"])
    [added_d3] = [
        e.event_id
        for e in scene.source.events.next_events(first.last_event_id)
        if e.event_type == "ADD_PARTITION"
    ]
    dumped = scene.engine.execute(f"REPL DUMP sales FROM {first.last_event_id}")

    def one_more_file(doc: dict[str, Any]) -> None:
        doc["message"]["data"]["count"] += 1

    replica_d1 = scene.target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.location
    files = scene.files()
    failed = scene.cli_load(
        scene.tampered(dumped.dump_dir, lambda d: edit_event(d, "INSERT", one_more_file, nth=1))
    )
    assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
    [line] = failed.stderr.strip().splitlines()
    assert "d3" in line and "event is missing" in line, line
    assert repl_status(scene.target, "sales_dr") == added_d3  # the source's state before the tampered event
    after = scene.files()
    running_marks = "/.hmsrepl-loads/"
    changed = {k for k in after.keys() | files.keys() if after.get(k) != files.get(k)}
    # The two files the committed parts added, and the replica's cmroot pins of them (name_checksum).
    added = {k.rsplit("/", 1)[1].split("_crc32c-")[0] for k in changed if running_marks not in f"/{k}"}
    assert added == {"a1.parquet", "c0.parquet"}
    assert len([k for k in changed if running_marks not in f"/{k}"]) == 4
    assert all(k in after for k in changed)  # nothing removed, nothing overwritten
    assert not [k for k in after if ".hmsrepl-staging-" in k]
    assert scene.target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.location == replica_d1
    done = scene.cli_load(dumped.dump_dir)
    assert done.returncode == 0, done.stderr
    assert scene.target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.location == replica_d1
    assert verify(scene.source, "sales", scene.target, "sales_dr") == []


def test_a_load_refused_for_its_target_leaves_no_running_mark(scene: Scene) -> None:
    """Refused before its first change (the target is not a replica): no '.hmsrepl-loads' mark, no directory."""
    first = scene.engine.execute("REPL DUMP sales")
    increment = scene.engine.execute(f"REPL DUMP sales FROM {first.last_event_id}")
    files = scene.files()
    done = scene.cli_load(increment.dump_dir)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "run a bootstrap dump and load first" in line, line
    assert scene.files() == files
    assert not list(scene.root.rglob(".hmsrepl-loads"))
