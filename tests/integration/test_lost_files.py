"""A file lost at the source (gone from its location and its cmroot) no longer stalls the whole replica.

By default the load refuses before its first change, as before. With ``'hmsrepl.repl.lost.files'=
'skip-objects'`` it applies the rest of the window, keeps the affected partition's data as the replica had it,
marks it stale, reports it (load result, CLI, verify), keeps skipping its deltas in later windows, and a
complete overwrite at the source brings it back: the mark goes and the replica equals the source again.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hmsrepl.exceptions import FileLostError
from hmsrepl.metastore import Metastore
from hmsrepl.replication.commands import CommandError, parse_command
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import LoadEngine, repl_status
from hmsrepl.replication.lost_files import STALE
from hmsrepl.replication.verify import capture_state, diff_states, verify
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, repl_run_cli, write_file
from tests.integration.test_replica_listing import FILES, append, bootstrap, seed

SKIP = "WITH ('hmsrepl.repl.lost.files'='skip-objects')"
D1 = ("orders", "day=d1")


def lose(source: Metastore, name: str) -> None:
    """Rewrite a recorded file behind the metastore's back after cmroot lost its pin (retention passed)."""
    pins = list(Path(local_path(source.config.cmroot)).rglob(f"{name}_*"))
    assert pins, "capture pins every recorded file into cmroot"
    for pin in pins:
        pin.unlink()
    part = source.catalog.get_partition("sales", "orders", ["d1"])
    path = Path(local_path(part.sd.location), name)
    path.unlink()
    path.write_bytes(b"other rows, written without the metastore")


def change_plain(source: Metastore, name: str) -> None:
    plain = source.catalog.get_table("sales", "plain")
    new = write_file(plain.sd.location, name, f"rows of {name}".encode())
    source.catalog.insert("sales", "plain", new_files=[new])


def replica_d1(target: Metastore) -> tuple[set[str], str | None]:
    part = target.catalog.get_partition("sales_dr", "orders", ["d1"])
    return {p.name for p in Path(local_path(part.sd.location)).iterdir()}, part.parameters.get(STALE)


def load_cli(dump_dir: str, target: Metastore, source: Metastore) -> subprocess.CompletedProcess[str]:
    return repl_run_cli(f"REPL LOAD sales_dr FROM '{dump_dir}' {SKIP}", target, source)


def test_a_lost_file_leaves_its_partition_stale_and_the_rest_replicates(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    seed(source)
    bootstrap(engine)
    before_files, _ = replica_d1(target)
    append(source, "lost.parquet", b"rows nobody can fetch any more")
    first_lost = source.events.current_event_id()
    lose(source, "lost.parquet")
    change_plain(source, "000001_0")
    position = repl_status(target, "sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {position}")

    # Default: refused before the first change, naming the setting that lets it go on.
    state = capture_state(target, "sales_dr")
    with pytest.raises(FileLostError, match=r"lost\.parquet.*nothing was applied.*skip-objects"):
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert repl_status(target, "sales_dr") == position
    assert diff_states(state, capture_state(target, "sales_dr")) == []
    with pytest.raises(CommandError, match=r"hmsrepl\.repl\.lost\.files.*'skip-objects'"):
        engine.execute(
            f"REPL LOAD sales_dr FROM '{dumped.dump_dir}' WITH ('hmsrepl.repl.lost.files'='ignore')"
        )

    # Opted in: the rest applies, the partition keeps its data, is marked and reported.
    ran = load_cli(dumped.dump_dir, target, source)
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr
    stale_lines = [line for line in ran.stderr.splitlines() if line.startswith("stale: ")]
    assert stale_lines == [
        f"stale: sales_dr.orders/day=d1: stale ({first_lost}: 1 files lost), data kept as the replica had it; "
        "overwrite it at the source (a complete listing replaces the replica's data and clears the mark) or "
        "re-bootstrap the database (REPL DUMP <db>, then REPL LOAD)"
    ]
    assert repl_status(target, "sales_dr") == dumped.last_event_id
    files, mark = replica_d1(target)
    assert files == before_files and len(files) == FILES
    assert mark == f"{first_lost}: 1 files lost"
    differences = verify(source, "sales", target, "sales_dr")
    assert len(differences) == 1, differences
    assert differences[0].startswith("partition orders/day=d1: files differ (missing ['lost.parquet']")
    assert f"marked stale on the replica ({mark})" in differences[0]

    # A later delta onto the stale partition is skipped (still reported); other tables keep replicating.
    append(source, "later.parquet", b"a later append")
    change_plain(source, "000002_0")
    result = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}")
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{result.dump_dir}'")
    assert [line.split(":")[0] for line in loaded.stale] == ["sales_dr.orders/day=d1"]
    assert replica_d1(target) == (before_files, mark)
    assert [
        d for d in verify(source, "sales", target, "sales_dr") if not d.startswith("partition orders")
    ] == []

    # A complete overwrite at the source replaces the replica's data and clears the mark.
    part = source.catalog.get_partition("sales", "orders", ["d1"])
    for path in Path(local_path(part.sd.location)).iterdir():
        path.unlink()
    fresh = write_file(part.sd.location, "overwrite.parquet", b"all new rows")
    source.catalog.insert("sales", "orders", ["d1"], new_files=[fresh], replace=True)
    result = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}")
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{result.dump_dir}'")
    assert loaded.stale == ["sales_dr.orders/day=d1: no longer stale (a complete change replaced its data)"]
    assert replica_d1(target) == ({"overwrite.parquet"}, None)
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_new_partition_whose_only_file_is_lost_is_created_empty_and_stale(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    seed(source)
    bootstrap(engine)
    orders = source.catalog.get_table("sales", "orders")
    [part] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d2")])
    path = Path(local_path(write_file(part.sd.location, "only.parquet", b"rows of d2")))
    source.catalog.insert("sales", "orders", ["d2"])
    for pin in Path(local_path(source.config.cmroot)).rglob("only.parquet_*"):
        pin.unlink()
    path.write_bytes(b"rewritten in place, longer than before")
    dumped = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}")
    # A parallel copier (the Spark load app) plans the lost file only when the load will not skip it.
    planner = LoadEngine(target, source_roots=engine.load_source_roots)
    default, skipping = (
        [
            task.encoded
            for task in planner.plan_copies(parse_command(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'{w}"))
        ]
        for w in ("", f" {SKIP}")
    )
    assert [Path(e.split("#")[0]).name for e in default] == ["only.parquet"] and skipping == []
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}' {SKIP}")
    assert [line.split(":")[0] for line in loaded.stale] == ["sales_dr.orders/day=d2"]
    replica = target.catalog.get_partition("sales_dr", "orders", ["d2"])
    assert replica.parameters[STALE].endswith(": 1 files lost")
    location = Path(local_path(replica.sd.location))
    assert not location.exists() or not any(location.iterdir())
    [difference] = verify(source, "sales", target, "sales_dr")
    assert difference.startswith("partition orders/day=d2: files differ (missing ['only.parquet']")
