"""Copies staged through open directories (``storage.directory_copies``): each directory is checked by the
real path of what the kernel opened, once per copy worker's slice, and every name in it is one segment.

A directory replaced by a symlink leading out of the roots between two slices of a load is refused by the
next slice, and nothing outside the roots is written (as are the load's renames and pins through such a
directory); a source file that is a symlink is checked as a whole
path, as without directories; a file whose size is not the recorded one never passes for its copy.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.replication.copy_processes import _copy_slice
from hmsrepl.replication.filecopy import CopyTask
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.directory_copies import OpenDirectories, copy_in_directories, rename_in_directories
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem, plain_name
from hmsrepl.storage.staging import STAGING_PREFIX
from tests.security.untouched import tree_hashes


def _partition(root: Path, files: int) -> tuple[list[CopyTask], Path]:
    """Copy tasks of a source partition of ``files`` files into the replica's ``p=a`` (made, as a load's
    fresh directory), and that directory."""
    src, dst = root / "src" / "p=a", root / "dst" / "p=a"
    src.mkdir(parents=True)
    dst.mkdir(parents=True)
    tasks = []
    for i in range(files):
        data = f"row {i}".encode()
        (src / f"f{i:02d}").write_bytes(data)
        encoded = EncodedFileUri(f"{src}/f{i:02d}", checksum_bytes(data)).encode()
        tasks.append(CopyTask(encoded, f"{dst}/f{i:02d}", (str(src),), "", (str(root / "dst"),)))
    return tasks, dst


def _staged(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name.startswith(STAGING_PREFIX)}


def test_a_staging_directory_swapped_for_a_symlink_mid_load_is_refused(tmp_path: Path) -> None:
    tasks, dst = _partition(tmp_path, 8)
    fresh = frozenset({str(dst)})
    outcomes, _ = _copy_slice(tasks[:4], fresh)  # the first slice, through the open directories
    assert [kind for kind in outcomes] == [(5, False, False)] * 4
    victim = tmp_path / "victim"
    victim.mkdir()
    dst.rename(victim / "moved")  # the replica's directory moved out, a symlink to it in its place
    dst.symlink_to(victim / "moved")
    before = tree_hashes(victim)
    with pytest.raises(OutsideRootsError) as info:
        _copy_slice(tasks[4:], fresh)
    message = str(info.value)
    assert "\n" not in message and "refused" in message and str(victim / "moved") in message, message
    assert tree_hashes(victim) == before, "a copy was written through the planted symlink"


@pytest.mark.parametrize("leads", ["into the roots", "out of the roots"])
def test_a_source_file_that_is_a_symlink_is_checked_as_a_whole_path(tmp_path: Path, leads: str) -> None:
    tasks, dst = _partition(tmp_path, 3)
    src = tmp_path / "src" / "p=a"
    aim = src / "f00" if leads == "into the roots" else tmp_path / "secret"
    (tmp_path / "secret").write_bytes(b"row 1")  # the content f01's checksum records
    (src / "f01").unlink()
    (src / "f01").symlink_to(aim if leads == "out of the roots" else src / "f02")
    (src / "f02").write_bytes(b"row 1")
    tasks[2] = CopyTask(
        EncodedFileUri(f"{src}/f02", checksum_bytes(b"row 1")).encode(),
        f"{dst}/f02",
        (str(src),),
        "",
        (str(dst.parent),),
    )
    if leads == "out of the roots":
        with pytest.raises(OutsideRootsError, match="source files of this load"):
            _copy_slice(tasks, frozenset({str(dst)}))
        assert f"{STAGING_PREFIX}f01" not in _staged(dst)
        return
    outcomes, _ = _copy_slice(tasks, frozenset({str(dst)}))
    assert len(outcomes) == 3 and all(isinstance(kind, tuple) for kind in outcomes)
    assert _staged(dst)[f"{STAGING_PREFIX}f01"] == b"row 1", "a symlink inside the roots is copied, as before"


@pytest.mark.parametrize("size", [3, 5, 9, 4 * 1024 * 1024 + 1])
def test_a_file_of_another_size_than_recorded_never_passes_for_its_copy(tmp_path: Path, size: int) -> None:
    """The copy reads one byte past the recorded size: a longer file is read to its end, a shorter one ends
    early; either way its token is not the recorded one and no staged copy is left."""
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    (tmp_path / "src" / "f").write_bytes(b"x" * size)
    recorded = checksum_bytes(b"x" * 5)
    source = RootedFileSystem([str(tmp_path / "src")], purpose="source")
    target = RootedFileSystem([str(tmp_path / "dst")], purpose="replica")
    opened = OpenDirectories()
    try:
        copied = copy_in_directories(
            f"{tmp_path}/src/f",
            f"{tmp_path}/dst/{STAGING_PREFIX}f",
            recorded,
            source=source,
            target=target,
            opened=opened,
        )
    finally:
        opened.close()
    assert copied == (size == 5)
    assert _staged(tmp_path / "dst") == ({f"{STAGING_PREFIX}f": b"x" * 5} if size == 5 else {})


def test_a_directory_outside_the_roots_is_never_opened_for_copies(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "out").symlink_to(tmp_path)
    fs = RootedFileSystem([str(tmp_path / "root")], purpose="replica files")
    opened = OpenDirectories()
    with pytest.raises(OutsideRootsError, match=r"replica files: refused .*resolves to"):
        opened.get(fs, f"{tmp_path}/root/out")
    assert opened.get(fs, f"{tmp_path}/root/missing") is None, "a missing directory is left to the full copy"
    fd = opened.get(fs, f"{tmp_path}/root")
    assert fd is not None and opened.get(fs, f"{tmp_path}/root") == fd, "opened once"
    opened.close()
    with pytest.raises(OSError):
        os.fstat(fd)


@pytest.mark.parametrize(
    ("name", "plain"),
    [("f", True), ("", False), (".", False), ("..", False), ("a/b", False), ("a\nb", False)],
)
def test_only_one_plain_segment_is_opened_relative_to_a_directory(name: str, plain: bool) -> None:
    assert plain_name(name) is plain


def test_a_publish_rename_out_of_a_staging_area_swapped_for_a_symlink_is_refused(tmp_path: Path) -> None:
    """The load's renames of a page (staging area -> new version) open both directories once: a staging
    area that is a symlink leading out of the roots is refused before anything is renamed."""
    replica, victim = tmp_path / "replica", tmp_path / "victim"
    (replica / "t.hmsrepl-v2").mkdir(parents=True)
    victim.mkdir()
    (victim / f"{STAGING_PREFIX}f").write_bytes(b"planted")
    (replica / "t").symlink_to(victim)
    fs = RootedFileSystem([str(replica)], purpose="replica files").batch()
    before = tree_hashes(tmp_path)
    with contextlib.closing(OpenDirectories()) as opened, pytest.raises(OutsideRootsError, match="refused"):
        rename_in_directories(
            f"{replica}/t/{STAGING_PREFIX}f", f"{replica}/t.hmsrepl-v2/f", fs=fs, opened=opened
        )
    assert tree_hashes(tmp_path) == before


def test_a_publish_rename_acts_on_names(tmp_path: Path) -> None:
    """A renamed name that is a symlink moves as a symlink (never followed), a missing one answers False, a
    name that is not one plain segment is left to the full check (None)."""
    (tmp_path / "t").mkdir()
    (tmp_path / "v").mkdir()
    (tmp_path / "t" / "link").symlink_to(tmp_path / "t" / "missing")
    fs = RootedFileSystem([str(tmp_path)], purpose="replica files")
    with contextlib.closing(OpenDirectories()) as opened:
        assert rename_in_directories(f"{tmp_path}/t/link", f"{tmp_path}/v/f", fs=fs, opened=opened) is True
        assert rename_in_directories(f"{tmp_path}/t/gone", f"{tmp_path}/v/g", fs=fs, opened=opened) is False
        assert rename_in_directories(f"{tmp_path}/t/..", f"{tmp_path}/v/h", fs=fs, opened=opened) is None
    assert os.readlink(tmp_path / "v" / "f") == str(tmp_path / "t" / "missing")


def test_pins_link_regular_files_only_and_refuse_a_cmroot_swapped_for_a_symlink(tmp_path: Path) -> None:
    """A pin links the recorded file relative to its open directories; a symlink in the roots is pinned by
    full paths, as before (its name is linked, never read), and a cmroot replaced by a symlink leading out of
    the roots between two loads' pins is refused before anything is linked."""
    part, cmroot, victim = tmp_path / "wh" / "t", tmp_path / "cm", tmp_path / "victim"
    for directory in (part, cmroot, victim):
        directory.mkdir(parents=True)
    (part / "f").write_bytes(b"data")
    (part / "g").symlink_to(part / "f")
    cm = ChangeManager(str(cmroot), roots=[str(tmp_path / "wh")])
    data = checksum_bytes(b"data")
    assert cm.pin([cm.encode(f"{part}/f", data), cm.encode(f"{part}/g", data)]) == 2
    assert os.path.samefile(cmroot / f"f_{data}", part / "f") and not os.path.islink(cmroot / f"f_{data}")
    assert os.readlink(cmroot / f"g_{data}") == str(part / "f")
    cmroot.rename(tmp_path / "cm-moved")
    cmroot.symlink_to(victim)
    (part / "h").write_bytes(b"data")
    before = tree_hashes(victim)
    with pytest.raises(OutsideRootsError, match="refused"):
        cm.pin([cm.encode(f"{part}/h", data)])
    assert tree_hashes(victim) == before
