"""The load app's copy on real Spark tasks, in every durability mode: verified, all-or-nothing per file.

A file whose source no longer has the dump's checksum is copied from cmroot when cmroot still has it, and
fails (named, nothing staged for it) when nothing does; the other files are staged, reused by a re-run
and published, and the target then holds exactly the dump's content.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.replication.filecopy import CopyTask, publish_all, staging_name
from hmsrepl.spark.copy import SparkCopyError, spark_copy
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import DURABILITY_MODES, LocalFileSystem
from hmsrepl.storage.rooted import RootedFileSystem


def dump_task(src: Path, dst: Path, cmroot: Path, relative: str, data: bytes) -> CopyTask:
    path = src / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    encoded = EncodedFileUri(str(path), checksum_bytes(data), str(cmroot)).encode()
    return CopyTask(encoded, str(dst / relative), (str(src), str(cmroot)), target_roots=(str(dst),))


@pytest.mark.parametrize("durability", DURABILITY_MODES)
def test_spark_copy_stages_verified_copies_and_names_the_lost_file(
    spark: object, tmp_path: Path, durability: str
) -> None:
    src, dst, cmroot = tmp_path / "src", tmp_path / "dst", tmp_path / "cm"
    cmroot.mkdir()
    sizes = [0, 1, 4096, 5 * 1024 * 1024 + 3] + [4096] * 60
    expected = {f"p={i % 4}/part-{i:03d}": os.urandom(size) for i, size in enumerate(sizes)}
    good = [dump_task(src, dst, cmroot, rel, data) for rel, data in expected.items()]

    # Replaced at the source after the event; cmroot kept the version the dump names.
    kept = os.urandom(9000)
    from_cm = dump_task(src, dst, cmroot, "p=0/replaced", kept)
    (src / "p=0" / "replaced").write_bytes(os.urandom(9000))
    (cmroot / f"replaced_{checksum_bytes(kept)}").write_bytes(kept)
    expected["p=0/replaced"] = kept
    # Changed in place (same size) and never saved to cmroot: no copy with the dump's checksum is left.
    lost = dump_task(src, dst, cmroot, "p=1/lost", os.urandom(7000))
    (src / "p=1" / "lost").write_bytes(os.urandom(7000))

    with pytest.raises(SparkCopyError) as failed:
        spark_copy(spark, [*good, from_cm, lost], durability=durability)  # type: ignore[arg-type]
    assert [(f.uri, f.target) for f in failed.value.failures] == [(str(src / "p=1/lost"), lost.target_uri)]
    assert "no copy of" in failed.value.failures[0].reason
    assert not os.path.exists(staging_name(lost.target_uri)) and not os.path.exists(lost.target_uri)

    # The re-run without the lost file reuses every verified staged copy, then the load publishes them.
    results = spark_copy(spark, [*good, from_cm], durability=durability)  # type: ignore[arg-type]
    assert all(r.prefetched for r in results)
    publish_all(RootedFileSystem([str(dst)], purpose="test"), [task.target_uri for task in [*good, from_cm]])
    fs = LocalFileSystem()
    copied = {
        s.uri[len(str(dst)) + 1 :]: fs.checksum(s.uri) for s in fs.list_files(str(dst))
    }  # no staged or temporary names left either
    assert copied == {rel: checksum_bytes(data) for rel, data in expected.items()}


def test_spark_copy_reports_progress_from_the_executors_in_the_driver_log(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    monkeypatch.setenv("HMSREPL_SPARK_PROGRESS_SECONDS", "0.1")
    caplog.set_level(logging.INFO, logger="hmsrepl.spark.progress")
    src, dst, cmroot = tmp_path / "src", tmp_path / "dst", tmp_path / "cm"
    cmroot.mkdir()
    tasks = [dump_task(src, dst, cmroot, f"part-{i:02d}", os.urandom(256 * 1024)) for i in range(24)]

    results = spark_copy(spark, tasks)  # type: ignore[arg-type]

    assert len(results) == 24
    lines = [r.getMessage() for r in caplog.records if r.name == "hmsrepl.spark.progress"]
    # The executors' counts reached the driver over its progress port (not from the collected results).
    assert lines and lines[-1].startswith(
        "hmsrepl copy: done, 24 of 24 files, 6.0 MiB of 6.0 MiB copied (100%)"
    )
