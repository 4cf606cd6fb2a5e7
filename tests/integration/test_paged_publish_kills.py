"""A bootstrap load killed while it publishes a partition's version a page of its listing at a time
converges when run again.

The partition's listing is in its own ``_files`` (the dump writes one apart past ``PAGE_FILES`` files, made
small here), so its version is filled, recorded and logged from the dump's pages (``_publish_pages``,
``page_capture``). The load runs as a real OS process killed with SIGKILL at step 1, 2, ... in turn (every
copied file and every page is a step). After every kill the replica shows the partition with all its files or
not at all, and says its bootstrap is done only once it shows it; the run that finishes leaves the source's files, recorded, and nothing staged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.metastore import listings
from hmsrepl.metastore.catalog.rows import partition_ids_named
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.snapshot_mapping import BOOTSTRAP_IN_PROGRESS
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.helpers import one_partition_directory, open_store, side_args
from tests.integration.test_load_kills import _load, _source_roots, _staged

FILES = 24


def test_a_bootstrap_killed_while_it_publishes_a_paged_partition_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hmsrepl.replication.layout.PAGE_FILES", 10)  # the partition gets its own _files
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    _, directory = one_partition_directory(source, "big")
    for i in range(FILES):
        (directory / f"part-{i:05d}.parquet").write_bytes(f"rows of file {i}".encode())
    source.catalog.insert("big", "t", ["a"])
    dump = ReplicationEngine(str(tmp_path / "dumps"), source).execute("REPL DUMP big")
    assert (Path(dump.dump_dir) / "big" / "t" / "p=a" / "_files").exists()  # type: ignore[union-attr]
    command = f"REPL LOAD big_dr FROM '{dump.dump_dir}'"  # type: ignore[union-attr]
    target_args = [*side_args("target", target), *_source_roots(source)]

    step = 1
    while (done := _load(command, target_args, step)).returncode == -9:  # killed at step 1, 2, ... in turn
        try:
            held = target.catalog.get_partitions_by_names("big_dr", "t", ["p=a"])
        except NoSuchObjectError:
            held = []
        shown = [len(list(Path(local_path(part.sd.location or "")).iterdir())) for part in held]
        assert shown in ([], [FILES]), f"killed at step {step}, the partition shows {shown} files"
        finished = repl_status(target, "big_dr") is not None and BOOTSTRAP_IN_PROGRESS not in (
            target.catalog.get_database("big_dr").parameters
        )
        assert not finished or shown == [FILES], f"killed at step {step}, done without the partition"
        step += 1
    assert done.returncode == 0, done.stderr
    assert step > FILES, "the load finished before the kills reached every copied file"

    assert verify(source, "big", target, "big_dr") == []
    assert _staged(tmp_path / "target_wh") == []
    [part] = target.catalog.get_partitions_by_names("big_dr", "t", ["p=a"])
    assert len(list(Path(local_path(part.sd.location or "")).iterdir())) == FILES
    table = target.catalog.get_table("big_dr", "t")
    assert table.id is not None
    with target.events.reader() as conn:
        [part_id] = partition_ids_named(conn, table.id, ["p=a"]).values()
        assert listings.summary(conn, ObjectKey(table.id, part_id)).count == FILES
    source.close()
    target.close()
