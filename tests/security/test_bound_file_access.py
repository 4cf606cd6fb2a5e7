"""Crafted paths are refused by the rooted file systems that dump copies, Iceberg rewrites and a metastore's
own listings now go through, before any byte is read or written.

Each attack names a place outside the roots its work may touch, in the ways a path can lead there:

- a copy task planned from a crafted dump (what the Spark load app's executors run): a source file that is a
  symlink out of the source warehouse, with the checksum of the file it leads to (a dump's checksums are its
  author's word), and a target with ``..`` segments or at an absolute path outside the replica;
- the replica's copy of an Iceberg table's metadata JSON, or its ``metadata`` directory, is a symlink out of
  the replica's table directory: the rewrite would read it and write its content into the replica;
- a table's directory inside the warehouse replaced by a symlink to another directory: a write's listing
  would checksum the files there (on SQLite, PostgreSQL and MariaDB).

Each refusal is one line from ``OutsideRootsError``; the files outside (hashed, modes included), the
replica's files and, where a metastore is involved, its rows and notification log are unchanged.
(A stock source's table directory that is a symlink: ``test_stock_source_roots``.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, StorageDescriptor
from hmsrepl.replication import iceberg
from hmsrepl.replication.filecopy import CopyTask, run_copy_task
from hmsrepl.storage.base import FileIdentity
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import LocalFileSystem, local_path
from hmsrepl.storage.rooted import OutsideRootsError
from tests.helpers import make_table
from tests.security.untouched import Untouched

SECRET = b"a file below no root of this work"


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory outside every root, holding a secret and a JSON document an Iceberg reader would parse."""
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    (directory / "secret.bin").write_bytes(SECRET)
    (directory / "conf.json").write_text(json.dumps({"location": "/", "snapshots": [], "secret": "s3cr3t"}))
    (directory / "conf.json").chmod(0o644)
    return directory


def _refused_in_one_line(info: pytest.ExceptionInfo[OutsideRootsError], *fragments: str) -> str:
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


# -- a crafted dump's copy tasks ----------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["source-symlink", "target-dot-dot", "target-elsewhere"])
def test_a_crafted_copy_task_is_refused_before_any_io(tmp_path: Path, elsewhere: Path, how: str) -> None:
    source_dir = tmp_path / "src_wh" / "sales.db" / "orders"
    source_dir.mkdir(parents=True)
    (tmp_path / "src_cm").mkdir()
    replica = tmp_path / "dst_wh"
    (replica / "sales_dr.db" / "orders").mkdir(parents=True)
    source_file = source_dir / "part-0"
    target = str(replica / "sales_dr.db" / "orders" / "part-0")
    if how == "source-symlink":
        source_file.symlink_to(elsewhere / "secret.bin")
    else:
        source_file.write_bytes(SECRET)
    if how == "target-dot-dot":
        target = f"{replica}/sales_dr.db/orders/../../../elsewhere/planted"
    elif how == "target-elsewhere":
        target = str(elsewhere / "planted")
    task = CopyTask(
        EncodedFileUri(str(source_file), checksum_bytes(SECRET)).encode(),
        target,
        (str(source_dir), str(tmp_path / "src_cm")),
        str(tmp_path / "src_cm"),
        target_roots=(str(replica), str(tmp_path / "dst_cm")),
    )
    guarded: list[Path | str] = [elsewhere, replica]
    before = Untouched.take(guarded, [])
    with pytest.raises(OutsideRootsError) as info:
        run_copy_task(task)
    purpose = "source files of this load" if how == "source-symlink" else "replica files of this load"
    _refused_in_one_line(info, purpose, "refused")
    before.assert_same(guarded, [])


# -- Iceberg metadata -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("link", ["metadata-file", "metadata-directory"])
def test_an_iceberg_metadata_copy_leading_out_of_the_replica_is_not_rewritten(
    tmp_path: Path, elsewhere: Path, link: str
) -> None:
    """The copy the rewrite reads (``<replica version>/metadata/<name>``) leads out of the replica's table."""
    source_location = str(tmp_path / "src_wh" / "ice.db" / "events")
    version = tmp_path / "dst_wh" / "ice_dr.db" / "events.hmsrepl-v7"
    version.mkdir(parents=True)
    name = "conf.json"
    if link == "metadata-file":
        (version / "metadata").mkdir()
        (version / "metadata" / name).symlink_to(elsewhere / name)
    else:
        (version / "metadata").symlink_to(elsewhere, target_is_directory=True)
    table = make_table("ice_dr", "events", table_type="ICEBERG")
    table.parameters["metadata_location"] = f"{source_location}/metadata/{name}"
    table.sd = StorageDescriptor(location=str(version), cols=table.sd.cols)
    guarded: list[Path | str] = [elsewhere, tmp_path / "dst_wh"]
    before = Untouched.take(guarded, [])
    with pytest.raises(OutsideRootsError) as info:
        iceberg.localize(table, source_location)
    _refused_in_one_line(info, "Iceberg metadata of 'ice_dr.events'", "outside the roots")
    before.assert_same(guarded, [])
    assert not (version / iceberg.LOCALIZED_DIR).exists()  # nothing of the secret was written to the replica


# -- a metastore's own listings --------------------------------------------------------------------------------
def test_a_table_directory_turned_into_a_symlink_is_not_listed(
    metastore: Metastore, tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write's capture lists through the change manager's file system (the metastore's data roots): the
    files the link leads to are not even read for their checksums."""
    read: list[str] = []
    identify = LocalFileSystem.identify

    def recording(self: LocalFileSystem, uri: str) -> FileIdentity:
        read.append(uri)
        return identify(self, uri)

    monkeypatch.setattr(LocalFileSystem, "identify", recording)
    metastore.catalog.create_database(Database(name="s"))
    table = metastore.catalog.create_table(make_table("s", "t"))
    directory = Path(local_path(table.sd.location or ""))
    directory.parent.mkdir(parents=True, exist_ok=True)
    if directory.exists():
        directory.rmdir()
    directory.symlink_to(elsewhere, target_is_directory=True)
    guarded: list[Path | str] = [elsewhere, metastore.config.warehouse, metastore.config.cmroot]
    before = Untouched.take(guarded, [metastore])
    with pytest.raises(OutsideRootsError) as info:
        metastore.catalog.insert("s", "t")
    _refused_in_one_line(info, "change manager", "outside the roots")
    before.assert_same(guarded, [metastore])
    assert read == []
