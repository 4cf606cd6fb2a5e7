"""The change manager: recycling, de-duplication, lookup by checksum and retention cleanup."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hmsrepl.exceptions import FileLostError
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import local_path
from tests.helpers import write_file


@pytest.fixture
def cm(tmp_path: Path) -> ChangeManager:
    return ChangeManager(str(tmp_path / "cmroot"), roots=[str(tmp_path)])


def test_recycled_file_is_found_by_its_encoded_uri(cm: ChangeManager, tmp_path: Path) -> None:
    uri = write_file(str(tmp_path / "wh/t"), "f.parquet", b"version one")
    encoded = cm.encode(uri, checksum_bytes(b"version one"))
    assert cm.resolve(encoded) == uri  # still in place
    cm.recycle([encoded])
    assert not os.path.exists(uri)
    assert cm.resolve(encoded) == cm.cm_uri(uri, checksum_bytes(b"version one"))
    assert Path(cm.resolve(encoded)).read_bytes() == b"version one"


def test_replaced_content_resolves_to_cmroot_not_new_file(cm: ChangeManager, tmp_path: Path) -> None:
    uri = write_file(str(tmp_path / "wh/t"), "f.parquet", b"old")
    old = cm.encode(uri, checksum_bytes(b"old"))
    cm.recycle([old])
    write_file(str(tmp_path / "wh/t"), "f.parquet", b"new!")  # same name, new content
    assert Path(cm.resolve(old)).read_bytes() == b"old"
    assert cm.resolve(cm.encode(uri, checksum_bytes(b"new!"))) == uri


def test_same_checksum_twice_is_kept_once(cm: ChangeManager, tmp_path: Path) -> None:
    first = write_file(str(tmp_path / "a"), "f.txt", b"same")
    cm.recycle([cm.encode(first, checksum_bytes(b"same"))])
    second = write_file(str(tmp_path / "a"), "f.txt", b"same")
    cm.recycle([cm.encode(second, checksum_bytes(b"same"))])
    assert os.listdir(local_path(cm.cmroot)) == [f"f.txt_{checksum_bytes(b'same')}"]
    assert not os.path.exists(second)


def test_lost_file_error_names_file_and_remedy(cm: ChangeManager, tmp_path: Path) -> None:
    uri = write_file(str(tmp_path / "w"), "gone.orc", b"x")
    encoded = cm.encode(uri, checksum_bytes(b"x"))
    os.unlink(uri)
    with pytest.raises(FileLostError, match=r"gone\.orc.*bootstrap"):
        cm.resolve(encoded)


def test_cleanup_removes_only_files_past_retention(cm: ChangeManager, tmp_path: Path) -> None:
    for name, data in (("old.txt", b"1"), ("new.txt", b"22")):
        uri = write_file(str(tmp_path / "w"), name, data)
        cm.recycle([cm.encode(uri, checksum_bytes(data))])
    old_copy = local_path(cm.cm_uri("old.txt", checksum_bytes(b"1")))
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old_copy, (two_days_ago, two_days_ago))
    result = cm.cleanup(retention_seconds=24 * 3600)
    assert (result.deleted, result.kept, result.bytes_deleted) == (1, 1, 1)
    assert os.listdir(local_path(cm.cmroot)) == [f"new.txt_{checksum_bytes(b'22')}"]


def test_recycling_again_restarts_retention(cm: ChangeManager, tmp_path: Path) -> None:
    uri = write_file(str(tmp_path / "w"), "f", b"data")
    cm.recycle([cm.encode(uri, checksum_bytes(b"data"))])
    kept = local_path(cm.cm_uri(uri, checksum_bytes(b"data")))
    os.utime(kept, (0, 0))
    uri = write_file(str(tmp_path / "w"), "f", b"data")
    cm.recycle([cm.encode(uri, checksum_bytes(b"data"))])
    assert cm.cleanup(retention_seconds=3600).deleted == 0


def test_cm_disabled_deletes_instead(tmp_path: Path) -> None:
    cm = ChangeManager(str(tmp_path / "cmroot"), enabled=False, roots=[str(tmp_path)])
    uri = write_file(str(tmp_path / "w"), "f", b"data")
    encoded = cm.encode(uri, checksum_bytes(b"data"))
    assert encoded.split("#")[2] == ""  # no cmroot advertised in events
    cm.recycle([encoded])
    assert not os.path.exists(uri) and not os.path.exists(local_path(cm.cmroot))


def test_damaged_cmroot_copy_is_replaced_before_the_original_goes(cm: ChangeManager, tmp_path: Path) -> None:
    """A truncated file under the final cmroot name (an interrupted copy) is never taken for the content."""
    data = os.urandom(50_000)
    uri = write_file(str(tmp_path / "wh/t"), "f.parquet", data)
    encoded = cm.encode(uri, checksum_bytes(data))
    damaged = Path(local_path(cm.cm_uri(uri, checksum_bytes(data))))
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(data[:1000])
    cm.recycle([encoded])
    assert damaged.read_bytes() == data and not os.path.exists(uri)
    assert Path(cm.resolve(encoded)).read_bytes() == data


def test_file_rewritten_since_its_event_is_kept_under_its_own_checksum(
    cm: ChangeManager, tmp_path: Path
) -> None:
    uri = write_file(str(tmp_path / "wh/t"), "f.parquet", b"recorded")
    encoded = cm.encode(uri, checksum_bytes(b"recorded"))
    write_file(str(tmp_path / "wh/t"), "f.parquet", b"rewritten")
    cm.recycle([encoded])
    assert not os.path.exists(uri)
    assert Path(local_path(cm.cm_uri(uri, checksum_bytes(b"rewritten")))).read_bytes() == b"rewritten"
    assert not os.path.exists(local_path(cm.cm_uri(uri, checksum_bytes(b"recorded"))))
