"""A stock metastore's commit replicates the directories of exactly its write id (``hive_source.write_dirs``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.hive_source.write_dirs import belongs_to, write_id_files
from hmsrepl.metastore.change_manager import ChangeManager


@pytest.mark.parametrize(
    ("name", "write_id", "expected"),
    [
        ("delta_0000003_0000003_0000", 3, True),
        ("delta_0000003_0000003", 3, True),
        ("delete_delta_0000003_0000003_0000", 3, True),
        ("base_0000003", 3, True),
        ("delta_0000002_0000002_0000", 3, False),
        ("delta_0000001_0000003", 3, False),  # a compactor's range: written by other txns too
        ("base_0000003_v0000012", 3, False),  # the compactor's
        ("000000_0", 3, False),
    ],
)
def test_only_the_write_ids_own_directories_belong_to_it(name: str, write_id: int, expected: bool) -> None:
    assert belongs_to(name, write_id) is expected


def test_a_write_id_lists_its_data_files_or_the_marker_of_an_empty_overwrite(tmp_path: Path) -> None:
    table = tmp_path / "wh" / "t"
    for directory, files in {
        "delta_0000001_0000001_0000": ["000000_0"],
        "delta_0000002_0000002_0000": ["000000_0", "000001_0", "_orc_acid_version"],
        "base_0000003": ["_SUCCESS"],
    }.items():
        (table / directory).mkdir(parents=True)
        for name in files:
            (table / directory / name).write_text(directory)
    cm = ChangeManager(str(tmp_path / "cm"), enabled=False, roots=[str(tmp_path / "wh")])

    def listed(write_id: int) -> list[str]:
        return sorted(
            EncodedFileUri.decode(f).file_uri.rsplit("/t/", 1)[1]
            for f in write_id_files(cm, str(table), write_id)
        )

    assert listed(2) == ["delta_0000002_0000002_0000/000000_0", "delta_0000002_0000002_0000/000001_0"]
    assert listed(3) == ["base_0000003/_SUCCESS"]
    assert listed(4) == []
    assert write_id_files(cm, str(tmp_path / "wh" / "gone"), 1) == []
