"""Small builders for catalog objects used across tests."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import google_crc32c
from sqlalchemy import Engine, event

from hmsrepl.config import MetastoreConfig
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore, listings
from hmsrepl.metastore.capture import CLOCK_TICK_NS
from hmsrepl.metastore.model import Database, FieldSchema, Partition, StorageDescriptor, Table
from hmsrepl.storage.local import local_path
from tests import python_forks


def make_table(db: str, name: str, *, partition_keys: tuple[str, ...] = (), **params: str) -> Table:
    return Table(
        db_name=db,
        table_name=name,
        sd=StorageDescriptor(
            cols=[FieldSchema(name="id", type="int"), FieldSchema(name="name", type="string")],
            input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        ),
        partition_keys=[FieldSchema(name=key, type="string") for key in partition_keys],
        parameters=dict(params),
    )


def make_partition(table: Table, *values: str) -> Partition:
    return Partition(values=list(values), db_name=table.db_name, table_name=table.table_name)


def partition_at(table: Table, value: str, location: str) -> Partition:
    """Partition ``value`` of a one-key table, at a location the client chose."""
    part = make_partition(table, value)
    return part.model_copy(update={"sd": part.sd.model_copy(update={"location": location})})


def create_db_and_table(
    store: Metastore, db: str = "sales", table: str = "orders", **kwargs: object
) -> Table:
    store.catalog.create_database(Database(name=db))
    return store.catalog.create_table(make_table(db, table, **kwargs))  # type: ignore[arg-type]


def one_partition_directory(store: Metastore, db: str) -> tuple[Partition, Path]:
    """A database holding table ``t`` partitioned by ``p``, its partition ``p=a`` and that one's directory."""
    store.catalog.create_database(Database(name=db))
    table = store.catalog.create_table(make_table(db, "t", partition_keys=("p",)))
    [part] = store.catalog.add_partitions(db, "t", [make_partition(table, "a")])
    directory = Path(local_path(part.sd.location or ""))
    directory.mkdir(parents=True, exist_ok=True)
    return part, directory


def write_file(location: str, name: str, data: bytes) -> str:
    """Write a data file under a stored location; returns the file's URI in the location's spelling."""
    path = Path(local_path(location)) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"{location.rstrip('/')}/{name}"


def settle() -> None:
    """Wait one clock tick, so the files just written are older than it when the metastore lists them, as
    a real writer's files are by its metastore call (``capture.settled``): a capture then trusts their
    size and time instead of reading them again at the next write."""
    time.sleep(CLOCK_TICK_NS / 1e9)


def events_of(store: Metastore, after: int = 0) -> list[tuple[str, str | None, str | None]]:
    return [(e.event_type, e.db_name, e.table_name) for e in store.events.next_events(after)]


def open_store(root: Path, name: str) -> Metastore:
    """A SQLite metastore named ``name`` under ``root``: ``name.db``, ``name_wh`` and ``name_cm``."""
    return Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{root}/{name}.db",
            warehouse=str(root / f"{name}_wh"),
            cmroot=str(root / f"{name}_cm"),
        )
    )


def open_sqlite_source(root: Path) -> Metastore:
    """The replication tests' source: ``source.db``, ``src_wh`` and ``src_cm`` under ``root``."""
    return Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{root}/source.db",
            warehouse=str(root / "src_wh"),
            cmroot=str(root / "src_cm"),
        )
    )


def open_partitioned_source(root: Path, db: str, tables: int) -> Metastore:
    """``open_sqlite_source`` with database ``db`` of ``tables`` tables ``t<n>``, each of partitions
    ``p=a``, ``p=b`` and ``p=c`` holding one file (a bootstrap's input of several small tables)."""
    source = open_sqlite_source(root)
    source.catalog.create_database(Database(name=db))
    for number in range(tables):
        table = source.catalog.create_table(make_table(db, f"t{number}", partition_keys=("p",)))
        added = source.catalog.add_partitions(db, table.table_name, [make_partition(table, v) for v in "abc"])
        for part in added:
            write_file(part.sd.location or "", "f", f"{number}{part.values[0]}".encode())
    return source


def open_replica(db_url: str, root: Path) -> Metastore:
    """The replication tests' replica on ``db_url``: ``dst_wh`` and ``dst_cm`` under ``root``."""
    return Metastore.open(
        MetastoreConfig(db_url=db_url, warehouse=str(root / "dst_wh"), cmroot=str(root / "dst_cm"))
    )


def side_args(side: str, store: Metastore) -> list[str]:
    """The CLI/application options naming one side's metastore (``--source-db-url`` ...)."""
    config = store.config
    return [
        f"--{side}-db-url",
        config.db_url,
        f"--{side}-warehouse",
        config.warehouse,
        f"--{side}-cmroot",
        config.cmroot,
    ]


def repl_run_cli(
    command: str, target: Metastore, source: Metastore, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``hmsrepl repl run COMMAND`` in a child process against ``target``, with ``source``'s roots (and
    ``options`` after them; ``env``: variables added to this process's environment)."""
    roots = ["--source-warehouse", str(source.config.warehouse), "--source-cmroot", str(source.config.cmroot)]
    return run_cli("repl", "run", command, *side_args("target", target), *roots, *options, env=env)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``hmsrepl ARGS`` in a child process running this checkout (``env``: variables added to this
    process's environment); its output captured as text."""
    return python_forks.run_cli(
        list(args), {**os.environ, "PYTHONPATH": python_forks.PYTHONPATH, **(env or {})}, timeout=300
    )


def disk_files(location: str) -> dict[str, str]:
    """Data files below a location with CRC32C+size computed here, keyed by local path."""
    root = Path(local_path(location))
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not any(part.startswith(("_", ".")) for part in rel.split("/")):
            data = path.read_bytes()
            out[str(path)] = f"crc32c-{google_crc32c.value(data):08x}-{len(data)}"
    return out


def event_files(encoded: list[str]) -> dict[str, str]:
    """Encoded files as local path -> checksum, to compare with ``disk_files``."""
    entries = [EncodedFileUri.decode(e) for e in encoded]
    return {local_path(e.file_uri): e.checksum for e in entries}


def record_listing_writes(monkeypatch: Any) -> list[str]:
    """The relative path of every record ``listings.apply`` writes from now on, in order (a load that
    records only its change writes the new files' records, never the kept ones again)."""
    written: list[str] = []
    real = listings.apply

    def recording(conn, key, records, removed=(), **kwargs):  # type: ignore[no-untyped-def]
        records = list(records)
        written.extend(r.rel_path for r in records)
        return real(conn, key, records, removed, **kwargs)

    monkeypatch.setattr(listings, "apply", recording)
    return written


def dumped_partitions(
    dump_dir: str, db: str, table: str
) -> dict[str, tuple[dict[str, Any], list[str] | None]]:
    """A bootstrapped table's partitions in a dump, by Hive partition name: (snapshot, files or None),
    wherever the dump keeps them (pages, or a directory of their own)."""
    from hmsrepl.formats.partition_names import make_partition_name
    from hmsrepl.replication.layout import DumpDir, DumpLayout

    dump = DumpDir(dump_dir)
    keys = [k["name"] for k in dump.read_json(DumpLayout.table(db, table))["table"]["partition_keys"]]
    out = {}
    for dumped in dump.partitions(DumpLayout.table_dir(db, table)):
        snapshot = dumped.document["partition"]
        out[make_partition_name(keys, snapshot["values"])] = (snapshot, dumped.files)
    return out


def edit_dumped_partition(dump_dir: Path, db: str, table: str, name: str, change: Any) -> None:
    """Rewrite one partition of a bootstrap dump in place: ``change(document, files)`` edits the document
    (``{"partition": snapshot}``) and returns the files to write instead (None: the files stay)."""
    import json

    from hmsrepl.formats.partition_names import make_partition_name
    from hmsrepl.replication.layout import DumpDir, DumpLayout, encode_partition

    dump = DumpDir(str(dump_dir))
    keys = [k["name"] for k in dump.read_json(DumpLayout.table(db, table))["table"]["partition_keys"]]
    for page in dump.partition_pages(DumpLayout.table_dir(db, table)):
        lines = []
        for dumped in dump.read_partition_page(page):
            snapshot, files = dumped.document["partition"], dumped.files
            if make_partition_name(keys, snapshot["values"]) == name:
                files = _or_same(change(dumped.document, files), files)
                snapshot = dumped.document["partition"]
            lines.append(encode_partition(snapshot, files))
        (dump_dir / page).write_bytes(b"".join(line + b"\n" for line in lines))
    own = dump_dir / DumpLayout.partition(db, table, name)
    if own.exists():
        document = json.loads(own.read_text())
        files_at = own.parent / "_files"
        before = files_at.read_text().splitlines() if files_at.exists() else None
        files = _or_same(change(document, before), before)
        own.write_text(json.dumps(document))
        files_at.write_text("".join(f"{line}\n" for line in files or []))


def _or_same(files: list[str] | None, before: list[str] | None) -> list[str] | None:
    return before if files is None else files


def count_dumps(source: Metastore, engine: Any, *commands: str) -> tuple[list[Any], Any]:
    """The statements each REPL DUMP of ``commands`` sends to ``source``'s database (one ``Counts`` each),
    and the last dump's result: what a test compares across dumps of few and of many objects."""
    from hmsrepl.metastore.statement_counts import StatementCounter

    counter = StatementCounter(source.engine)
    counts, result = [], None
    try:
        for command in commands:
            with counter.counting() as counted:
                result = engine.execute(command)
            counts.append(counted)
    finally:
        counter.close()
    return counts, result


@contextmanager
def statements_sent(engine: Engine) -> Iterator[list[str]]:
    """The SQL text of every statement ``engine`` sends inside the block, in order."""
    sent: list[str] = []

    def note(conn: object, cursor: object, statement: str, *args: object) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", note)


def listing_lookups(statements: list[str]) -> list[str]:
    """Those of ``statements`` that look recorded paths up in a listing (``listings._replaced``)."""
    return [
        statement for statement in statements if "FROM data_files" in statement and "rel_path IN" in statement
    ]
