"""A new version's files are stated only when the replica's record needs their stamps."""

from __future__ import annotations

from hmsrepl.replication.replica_files import Published


def _version(stated: list[str]) -> Published:
    files = {f"f{i}": f"/r/t.hmsrepl-v9/f{i}#crc32c-0000000{i}-{i + 1}##" for i in range(3)}

    def stamp(rel: str) -> int:
        stated.append(rel)
        return 1_000 + int(rel[1:])

    return Published("/r/t.hmsrepl-v9", files, {}, set(), False, unstamped=list(files), stamp=stamp)


def test_a_version_its_catalog_call_records_is_not_stated_file_by_file() -> None:
    """A new version's catalog call logs and records its whole listing itself (stating the directory once):
    telling it what the version holds reads no stamp."""
    stated: list[str] = []
    version = _version(stated)
    assert not version.as_delta
    assert version.applied() is version.files
    assert stated == []


def test_a_record_written_from_the_version_has_every_copied_files_stamp() -> None:
    stated: list[str] = []
    records = list(_version(stated).records())
    assert [(r.rel_path, r.size, r.mtime_ns) for r in records] == [
        ("f0", 1, 1_000),
        ("f1", 2, 1_001),
        ("f2", 3, 1_002),
    ]
    assert stated == ["f0", "f1", "f2"]  # each once
