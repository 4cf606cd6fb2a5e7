"""The driver's side of the Hadoop-API copy (``spark.hadoop_copy``), without a JVM: which tasks it hands over,
the root checks made before, and the check of every copy the JVM reports before it is trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.replication.filecopy import CopyTask, staging_name
from hmsrepl.spark import hadoop_copy
from hmsrepl.spark.hadoop_copy import HadoopOutcome, HadoopTask, check_load, check_tree, load_task
from hmsrepl.storage.checksum import checksum_bytes, parse_checksum_token

NN = "hdfs://nn:8020"
DATA = b"the rows of the event"
TOKEN = checksum_bytes(DATA)
CRC = f"{parse_checksum_token(TOKEN)[0]:08x}"


def hdfs_task(file_uri: str = f"{NN}/src/t/f", version: str = "", cmroot: str = f"{NN}/cm") -> CopyTask:
    encoded = EncodedFileUri(file_uri, TOKEN, cmroot, "", version).encode()
    return CopyTask(encoded, f"{NN}/dst/t/f", (f"{NN}/src/t", f"{NN}/cm"), target_roots=(f"{NN}/dst",))


def test_hdfs_tasks_go_to_the_jvm_with_their_candidates_in_order_and_a_snapshot_as_its_path() -> None:
    planned = load_task(hdfs_task(version="/src/.snapshot/s1"))
    assert planned == HadoopTask(
        "load",
        f"{NN}/dst/t/.hmsrepl-staging-f",
        f"{NN}/dst/t/f",
        len(DATA),
        CRC,
        (f"{NN}/src/t/f", f"{NN}/src/.snapshot/s1/t/f", f"{NN}/cm/f_{TOKEN}"),
    )


def test_local_and_mixed_tasks_stay_with_the_python_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = CopyTask(
        EncodedFileUri(str(tmp_path / "f"), TOKEN).encode(), str(tmp_path / "d" / "f"), (str(tmp_path),)
    )
    assert load_task(local) is None
    mixed = CopyTask(
        hdfs_task().encoded, str(tmp_path / "d" / "f"), (f"{NN}/src/t",), target_roots=(str(tmp_path),)
    )
    assert load_task(mixed) is None
    monkeypatch.setenv(hadoop_copy.ENGINE_ENV, "python")
    assert load_task(hdfs_task()) is None


def test_a_path_outside_the_roots_is_refused_before_the_jvm_sees_it() -> None:
    with pytest.raises(StorageError, match="outside the source locations"):
        load_task(hdfs_task(file_uri=f"{NN}/elsewhere/f"))
    with pytest.raises(StorageError, match="outside the source locations"):
        load_task(hdfs_task(file_uri=f"{NN}/src/t/../../etc/f"))
    escaping = CopyTask(hdfs_task().encoded, f"{NN}/other/f", (f"{NN}/src/t",), target_roots=(f"{NN}/dst",))
    with pytest.raises(StorageError, match="outside the roots"):
        load_task(escaping)


def copied(streamed: str, stored: str, source: str = f"{NN}/src/t/f") -> HadoopOutcome:
    return HadoopOutcome(
        "copied", source, len(DATA), len(DATA), streamed, stored, CRC, "", hadoop_copy.ENGINE
    )


@pytest.mark.parametrize(
    ("streamed", "stored"), [("deadbeef", ""), (CRC, "deadbeef"), ("deadbeef", "deadbeef")], ids=str
)
def test_a_reported_copy_whose_checksum_is_not_the_dumps_is_removed_and_fails(
    tmp_path: Path, streamed: str, stored: str
) -> None:
    """Whatever the JVM says it checked, the driver compares the reported CRCs with the dump's checksum."""
    staged = tmp_path / "dst" / ".hmsrepl-staging-f"
    staged.parent.mkdir()
    staged.write_bytes(b"tampered rows of the event")
    task = CopyTask(
        EncodedFileUri(str(tmp_path / "src" / "f"), TOKEN).encode(),
        str(tmp_path / "dst" / "f"),
        (str(tmp_path / "src"),),
        target_roots=(str(tmp_path / "dst"),),
    )
    planned = HadoopTask("load", str(staged), task.target_uri, len(DATA), CRC, (str(tmp_path / "src" / "f"),))
    with pytest.raises(StorageError, match="expected crc32c-"):
        check_load(task, planned, copied(streamed, stored, str(tmp_path / "src" / "f")))
    assert not staged.exists()


def test_a_verified_copy_names_the_candidate_it_came_from() -> None:
    task = hdfs_task(version="/src/.snapshot/s1")
    planned = load_task(task)
    assert planned is not None
    result = check_load(task, planned, copied(CRC, CRC, f"{NN}/src/.snapshot/s1/t/f"))
    assert result.source_used == EncodedFileUri.decode(task.encoded).versioned_uri and not result.from_cmroot
    result = check_load(task, planned, copied(CRC, "", f"{NN}/cm/f_{TOKEN}"))
    assert (
        result.source_used == f"{NN}/cm/f_{TOKEN}" and result.from_cmroot and result.bytes_copied == len(DATA)
    )
    failed = HadoopOutcome("failed", "", 0, 0, "", "", "", "no copy with the expected content: tried x", "")
    with pytest.raises(
        StorageError, match=rf"no copy of '{NN}/src/t/f' with checksum {TOKEN} is left: tried x"
    ):
        check_load(task, planned, failed)


def test_a_tree_copy_must_match_the_sources_checksum(tmp_path: Path) -> None:
    target = tmp_path / "dst" / "f"
    target.parent.mkdir()
    target.write_bytes(DATA)
    planned = HadoopTask("tree", str(target), str(target), len(DATA), "", (f"{NN}/src/f",))
    assert check_tree(planned, copied(CRC, CRC), (str(tmp_path / "dst"),)) == len(DATA)
    other = HadoopOutcome("copied", f"{NN}/src/f", len(DATA), len(DATA), CRC, CRC, "0badc0de", "", "")
    with pytest.raises(StorageError, match="expected crc32c-0badc0de"):
        check_tree(planned, other, (str(tmp_path / "dst"),))
    assert not target.exists()
    assert staging_name(str(target)).endswith("/.hmsrepl-staging-f")
