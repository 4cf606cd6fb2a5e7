"""A bootstrap's big partitions are copied while the validation walks the rest of the dump.

What a user relies on: the copying starts before the walk ends (on two cores the walk and a big partition's
copy no longer take turns) and the replica still equals the source; a dump the walk refuses after pages of
its big partitions were staged (a forged entry half way through a listing, a file named twice at its end) or
whose files the pre-flight finds gone leaves the replica exactly as it was: every staged copy and every
directory made for them is removed before the refusal is raised, with the refusal's own message.

Pages are made small, so the big partitions here (40 and 30 files) each span several. Two tables with big
partitions of different depths make the walk's order (tables first, then partitions shallowest first) differ
from the dump's path order: the removal plans again what was taken in the walk's order, and a wrong order would
leave the first partition's later copies behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.exceptions import FileLostError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.model import Database
from hmsrepl.replication import prestage
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.dump_validation import DumpValidator
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.failures import LoadFailedError
from hmsrepl.replication.filecopy import CopyTask
from hmsrepl.replication.prestage import DumpContentMismatchError
from hmsrepl.replication.staging_along import StagingAlong
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, make_table, open_store
from tests.security.untouched import Untouched

COPY_PAGE = 9  # copies staged at a time


@dataclass
class Scene:
    """Database ``big``: ``t`` (by ``p``: a big ``p=a``, a small ``p=b``) and ``a2`` (by ``x``, ``y``: a big
    ``x=1/y=2``), dumped; what the load did, in order."""

    engine: ReplicationEngine
    dump_dir: Path
    source_dirs: dict[str, Path]
    root: Path
    target: Metastore
    steps: list[str] = field(default_factory=list)  # "staged", "walked", "stopped with N staged"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, step: str) -> None:
        with self.lock:
            self.steps.append(step)

    def staged(self) -> int:
        with self.lock:
            return self.steps.count("staged")

    def load(self) -> None:
        self.engine.execute(f"REPL LOAD big_dr FROM '{self.dump_dir}'")

    def listing(self, relative: str) -> Path:
        return self.dump_dir / "big" / relative / "_files"

    def guarded(self) -> list[Path | str]:
        return [self.root / "target_wh", self.root / "target_cm"]


def content(name: str, i: int) -> bytes:
    return f"rows of {name} file {i:03d}".encode()


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    monkeypatch.setattr("hmsrepl.replication.layout.PAGE_FILES", 10)  # big partitions get their own _files
    monkeypatch.setattr("hmsrepl.replication.layout.LISTING_PAGE", 7)
    monkeypatch.setattr("hmsrepl.replication.dump_snapshot_checks.FILES_PAGE", 6)
    monkeypatch.setattr("hmsrepl.replication.staging_along.COPY_PAGE", COPY_PAGE)
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    source.catalog.create_database(Database(name="big"))
    t = source.catalog.create_table(make_table("big", "t", partition_keys=("p",)))
    a2 = source.catalog.create_table(make_table("big", "a2", partition_keys=("x", "y")))
    sizes = {("t", ("a",)): 40, ("t", ("b",)): 3, ("a2", ("1", "2")): 30}
    dirs: dict[str, Path] = {}
    for (table_name, values), count in sizes.items():
        table = t if table_name == "t" else a2
        [part] = source.catalog.add_partitions("big", table_name, [make_partition(table, *values)])
        directory = Path(local_path(part.sd.location or ""))
        directory.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            (directory / f"part-{i:05d}.parquet").write_bytes(content(table_name, i))
        source.catalog.insert("big", table_name, list(values))
        dirs[f"{table_name}/{'/'.join(values)}"] = directory
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    dumped = Path(engine.execute("REPL DUMP big").dump_dir)  # type: ignore[union-attr]
    scene = Scene(engine, dumped, dirs, tmp_path, target)
    assert scene.listing("t/p=a").exists() and scene.listing("a2/x=1/y=2").exists()
    assert not scene.listing("t/p=b").exists()  # a small partition: in a page, staged after the walk
    paced(scene, monkeypatch)
    try:
        yield scene
    finally:
        source.close()
        target.close()


def paced(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    """Note each page staged and the walk's end; the walk waits (a few seconds at most) after each page it
    hands on until every full page of copies of the files handed on so far is staged, so those copies are
    there when a refusal comes, whatever the threads' timing."""
    real_stage, real_hand_on, real_stop = prestage._stage_page, StagingAlong.hand_on, StagingAlong.stop
    real_walk = DumpValidator.validate_bootstrap
    handed_on = [0]

    def stage_page(tasks: Sequence[CopyTask], *args: object) -> object:
        outcomes = real_stage(tasks, *args)  # type: ignore[arg-type]
        scene.note("staged")
        return outcomes

    def hand_on(self: StagingAlong, document: dict[str, Any], where: str, page: list[str]) -> None:
        real_hand_on(self, document, where, page)
        handed_on[0] += len(page)
        deadline = time.monotonic() + 5
        staging = self._thread
        while scene.staged() < handed_on[0] // COPY_PAGE and time.monotonic() < deadline:
            if staging is None or not staging.is_alive():  # failed: the next page raises its error
                return
            time.sleep(0.005)

    def stop(self: StagingAlong) -> None:
        scene.note(f"stopped with {scene.staged()} staged")
        real_stop(self)

    def walk(self: DumpValidator) -> object:
        report = real_walk(self)
        scene.note("walked")
        return report

    monkeypatch.setattr(prestage, "_stage_page", stage_page)
    monkeypatch.setattr(StagingAlong, "hand_on", hand_on)
    monkeypatch.setattr(StagingAlong, "stop", stop)
    monkeypatch.setattr(DumpValidator, "validate_bootstrap", walk)


def test_the_big_partitions_are_copied_while_the_walk_goes_on_and_the_replica_equals_the_source(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []  # the files the load's records asked to pin
    real_pin = ChangeManager.pin

    def pin(self: ChangeManager, encoded_files: Iterable[str]) -> int:
        files = list(encoded_files)
        asked.extend(EncodedFileUri.decode(text).file_uri for text in files)
        return real_pin(self, files)

    monkeypatch.setattr(ChangeManager, "pin", pin)
    scene.load()

    walked = scene.steps.index("walked")
    assert "staged" in scene.steps[:walked], f"nothing was staged before the walk ended: {scene.steps}"
    assert "staged" in scene.steps[walked:], "the small partition's copies are staged after the walk"
    assert verify(scene.engine.source, "big", scene.target, "big_dr") == []
    for relative, directory in scene.source_dirs.items():
        table, values = relative.split("/", 1)
        [part] = scene.target.catalog.get_partitions_by_names(
            "big_dr",
            table,
            ["/".join(f"{k}={v}" for k, v in zip(keys(table), values.split("/"), strict=True))],
        )
        held = Path(local_path(part.sd.location or ""))
        assert {p.name: p.read_bytes() for p in held.iterdir()} == {
            p.name: p.read_bytes() for p in directory.iterdir()
        }
        # Each replica file's content is pinned in the replica's cmroot under its name and checksum, by the
        # staging for the big partitions (their records pin nothing again), by the record for the small one.
        for copy in held.iterdir():
            pins = (scene.root / "target_cm").glob(f"{copy.name}_*")
            assert copy.read_bytes() in {pin.read_bytes() for pin in pins}, f"{copy} is not pinned"
        big = relative != "t/b"
        assert any(local_path(uri).startswith(f"{held}/") for uri in asked) is not big, (relative, asked[:2])


def keys(table: str) -> list[str]:
    return ["p"] if table == "t" else ["x", "y"]


def forge_entry(scene: Scene, relative: str, line: int) -> None:
    """Entry ``line`` of the listing at ``relative`` names a file of another partition (outside its own)."""
    path = scene.listing(relative)
    lines = path.read_text().splitlines(keepends=True)
    lines[line] = lines[line].replace("/x=1/y=2/", "/x=1/y=3/", 1)
    path.write_text("".join(lines))


def name_twice(scene: Scene, relative: str) -> None:
    """The listing at ``relative`` names its first file again, at its end."""
    path = scene.listing(relative)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines, lines[0]]))


@pytest.mark.parametrize(
    ("fault", "refusal", "message"),
    [
        ("forged half way", DumpValidationError, "x=1/y=3"),
        ("named twice at the end", DumpValidationError, "twice"),
        ("a file gone", FileLostError, "gone from the source"),
    ],
)
def test_a_dump_refused_after_big_partitions_were_staged_leaves_the_replica_as_it_was(
    scene: Scene, fault: str, refusal: type[Exception], message: str
) -> None:
    if fault == "forged half way":
        forge_entry(scene, "a2/x=1/y=2", 20)  # the second listing walked, on its third page
    elif fault == "named twice at the end":
        name_twice(scene, "a2/x=1/y=2")
    else:  # deleted behind the metastore's back, its cmroot pin too
        (scene.source_dirs["a2/1/2"] / "part-00029.parquet").unlink()
        pins = (scene.root / "source_cm").rglob("part-00029.parquet_*")
        [pin] = [path for path in pins if path.read_bytes() == content("a2", 29)]
        pin.unlink()
    before = Untouched.take(scene.guarded(), [scene.target])

    with pytest.raises(refusal, match=message):
        scene.load()

    [stopped] = [step for step in scene.steps if step.startswith("stopped")]
    assert stopped != "stopped with 0 staged", f"nothing was staged before the refusal: {scene.steps}"
    before.assert_same(scene.guarded(), [scene.target])
    assert "big_dr" not in scene.target.catalog.get_databases()


def test_a_staging_that_fails_stops_the_walk_at_once_and_leaves_the_replica_as_it_was(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills while the first big partition is staged fails the load then, not after the walk
    of the rest of the dump (a 1,000,000-file partition's walk takes tens of seconds)."""
    paced_stage = prestage._stage_page
    calls = [0]

    def full_disk(tasks: Sequence[CopyTask], *args: object) -> object:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(28, "No space left on device")
        return paced_stage(tasks, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(prestage, "_stage_page", full_disk)
    before = Untouched.take(scene.guarded(), [scene.target])

    with pytest.raises(LoadFailedError, match="no space left on the target file system"):
        scene.load()

    assert "walked" not in scene.steps, "the walk went on to the end of the dump"
    before.assert_same(scene.guarded(), [scene.target])
    assert "big_dr" not in scene.target.catalog.get_databases()


def test_a_checksum_edited_in_a_big_partitions_listing_refuses_the_dump_and_leaves_the_replica_as_it_was(
    scene: Scene,
) -> None:
    """The dump's word for one file of the first big listing is changed to another checksum of the same size:
    the entry passes every check of the walk, and only its copy, staged while the walk goes on, finds the
    file's content is not the one named. The refusal comes once the staging ends, with every copy removed."""
    assert_an_edited_checksum_is_refused_and_changes_nothing(scene)


def test_a_refusal_keeps_the_replica_s_cmroot_files_that_bear_the_names_its_pins_would_have(
    scene: Scene,
) -> None:
    """The replica's cmroot already holds, under the very names the staging's pins take (file name and
    checksum), files of the same content that are not links of the new copies: pins kept for other files, or
    names planted there. The staging keeps them rather than link over them, and the refusal, which removes
    only a cmroot name that is a link of a copy it staged, leaves every one of them as it was."""
    target_cm = scene.root / "target_cm"
    target_cm.mkdir(exist_ok=True)
    planted = 0
    for pin in (scene.root / "source_cm").rglob("part-*.parquet_*"):
        (target_cm / pin.name).write_bytes(pin.read_bytes())  # a file of its own, not a link of the source's
        planted += 1
    assert planted >= 70, planted  # both big partitions' files
    assert_an_edited_checksum_is_refused_and_changes_nothing(scene)


def assert_an_edited_checksum_is_refused_and_changes_nothing(scene: Scene) -> None:
    """Give one file of the first big listing another checksum of the same size in the dump's ``_files``,
    load: the dump is refused after copies were staged, and the replica (its files, cmroot and catalog) is
    as it was."""
    path = scene.listing("t/p=a")
    lines = path.read_text().splitlines(keepends=True)
    entry = lines[3].split("#")
    size = entry[1].rsplit("-", 1)[1]
    entry[1] = f"crc32c-{'0' * 8}-{size}"
    lines[3] = "#".join(entry)
    path.write_text("".join(lines))
    before = Untouched.take(scene.guarded(), [scene.target])

    with pytest.raises(DumpContentMismatchError, match="checksum was edited"):
        scene.load()

    assert scene.steps.index("staged") < scene.steps.index("walked"), "nothing was staged during the walk"
    before.assert_same(scene.guarded(), [scene.target])
    assert "big_dr" not in scene.target.catalog.get_databases()
