"""Stage every copy a load needs before its first change, so a file that is not what the dump says refuses the
whole dump while the target is still untouched.

A dump's checksums are its own word: one forged on the second table of a dump would otherwise be found when
that table's copy is verified, after the load committed the database and the first table. Copying ahead costs
no more than copying during the load: each file is read from the source and written to its staging name once,
here, and the load then only publishes it (``filecopy.copy_verified`` takes a verified staged copy as it
finds it). When one file's content does not match, every copy staged here is removed again, with the
directories made for them, and the dump is refused. A task ``in_place`` (a bootstrap's big partition) is
staged under its own name in the new version the load will publish, which no metadata names yet: the load
then has nothing to rename for it (``StagedCopies.take_placed``).

Given the replica's change manager, the staging also pins each copy placed in a new version into cmroot, a
slice at a time as the copy processes hand their slices back: those links are made on the load's core while
the copy process goes on with the next slices, instead of one after the other in the load's transaction
(a partition of 1,000,000 files: some 25 s of links). The load's record of such a version then pins nothing
again (``ListingPages.pinned``). A refused dump removes those pins with the copies (``unpin_files``: only a
cmroot name that is a link of the copy itself); a load killed half way leaves them to cmroot's retention, as
it leaves the pins of a transaction it did not commit.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import cast

from hmsrepl.concurrency import bounded_map
from hmsrepl.exceptions import FileLostError
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.payloads import checksum_of
from hmsrepl.replication.copy_processes import (
    CopyPool,
    CopyProcessSettings,
    big_directories,
    copy_process_settings,
)
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.filecopy import CopyResult, CopyRunner, CopyTask, bound
from hmsrepl.replication.staged_copies import StagedCopies
from hmsrepl.storage.base import parent_uri
from hmsrepl.storage.local import deferred_sync
from hmsrepl.storage.rooted import RootedFileSystem
from hmsrepl.storage.staging import staging_name

#: Copy tasks planned and staged at a time: the tasks themselves are never held for a whole dump (a
#: partition of 1,000,000 files held a task, its target URI and its outcome per file). Twice the default
#: threshold of the copy processes, so a partition big enough for them has pages big enough too.
COPY_PAGE = 100_000
#: Placed copies pinned at a time, as their outcomes come in (one open of the two directories each time).
PIN_BATCH = 1_000
#: The copy tasks of a load a page at a time; called again (the same pages) to remove what was staged.
TaskPages = Callable[[], Iterable[Sequence[CopyTask]]]


@dataclass
class StagedAhead:
    """What ``stage_ahead`` made: the copies by planned target, and the local directories made for them."""

    copies: StagedCopies = field(default_factory=StagedCopies)
    made: list[str] = field(default_factory=list)  # deepest first


def stage_ahead(
    pages: TaskPages | Sequence[CopyTask],
    dump_uri: str,
    *,
    tolerate_lost: bool = False,
    pins: ChangeManager | None = None,
) -> StagedAhead:
    """Stage verified copies of the tasks ``pages`` yields; returns what was copied and the directories made
    for it. A page's tasks are staged before the next page is planned. ``pins``: the replica's change
    manager, which pins the copies placed in new versions as they are made (``PlacedPins``).

    Refuses the dump (DumpContentMismatchError) when a file's content is not the one its checksum names, unless
    ``tolerate_lost`` (a load that leaves objects with lost files stale: the load itself meets the file again
    and handles it). On a refusal or any other failure, what was staged here is removed before raising.
    """
    plan: TaskPages = (lambda: [pages]) if isinstance(pages, Sequence) else pages
    settings = copy_process_settings()  # a bad setting is refused before anything is staged
    ahead = StagedAhead()
    missing: set[str] = set()  # the directories made so far
    failed: FileLostError | None = None
    failures = 0
    pinner = PlacedPins(pins)
    try:
        # One sync of the file systems for all the copies, before the load's first change, instead of one
        # ``fdatasync`` per file (a partition of 1,000,000 files waited on the journal a million times).
        with deferred_sync("batch"), CopyPool(settings.processes) as pool:
            for tasks in plan():
                if not tasks:
                    continue
                ahead.made.extend(_directories_to_make(tasks, missing))
                staged = _stage_page(tasks, missing, settings, pool, pinner)
                for task, outcome in zip(tasks, staged, strict=True):
                    if isinstance(outcome, FileLostError):
                        failed, failures = failed or outcome, failures + 1
                    else:
                        placed = task.in_place
                        ahead.copies.add(task.target_uri, outcome, placed=placed, pinned=placed and pinner.on)
    except BaseException:
        remove_staged(plan, _deepest_first(ahead.made), pins=pins)
        raise
    ahead.made = _deepest_first(ahead.made)
    ahead.copies.made(ahead.made)
    if failed is not None and not tolerate_lost:
        remove_staged(plan, ahead.made, pins=pins)
        more = f" ({failures - 1} more files like it)" if failures > 1 else ""
        raise DumpContentMismatchError(
            f"dump '{dump_uri}' refused, nothing was applied: {failed}{more}; if the source did not change "
            "the file, the dump's checksum was edited: dump again"
        )
    return ahead


def _stage_page(
    tasks: Sequence[CopyTask],
    made: set[str],
    settings: CopyProcessSettings,
    pool: CopyPool,
    pinner: PlacedPins,
) -> list[CopyResult | FileLostError]:
    """Staged copies of one page's tasks, in order: partitions with enough files go to the copy processes
    (one process a partition), the rest stays in threads. Each placed copy is pinned as its outcome comes in,
    all of them before this returns."""
    directories = [parent_uri(task.target_uri) for task in tasks] if settings.may_pool(len(tasks)) else []
    big = big_directories(target_files(tasks), directories, settings) if directories else frozenset()
    outcomes: list[CopyResult | FileLostError | None] = [None] * len(tasks)
    rest = (
        [i for i, directory in enumerate(directories) if directory not in big] if big else range(len(tasks))
    )
    if big:
        in_big = ((i, tasks[i], directory) for i, directory in enumerate(directories) if directory in big)
        for index, outcome in pool.stage(in_big, len(tasks) - len(rest), frozenset(made)):
            outcomes[index] = pinner.took(tasks[index], outcome)
    for index, outcome in zip(rest, _in_threads([tasks[i] for i in rest], made), strict=True):
        outcomes[index] = pinner.took(tasks[index], outcome)
    pinner.flush()
    return cast(list[CopyResult | FileLostError], outcomes)  # every index was staged above


class PlacedPins:
    """Pins the copies placed in new versions (``CopyTask.in_place``) into the replica's cmroot, ``PIN_BATCH``
    at a time as they are staged; does nothing without a change manager (``on``: whether it pins)."""

    def __init__(self, cm: ChangeManager | None) -> None:
        self.cm = cm
        self._waiting: list[tuple[str, str]] = []

    @property
    def on(self) -> bool:
        return self.cm is not None

    def took(self, task: CopyTask, outcome: CopyResult | FileLostError) -> CopyResult | FileLostError:
        """Note ``task``'s outcome (given back as it is): a placed copy is pinned with the next batch."""
        if self.on and task.in_place and not isinstance(outcome, FileLostError):
            self._waiting.append(pinned_file(task))
            if len(self._waiting) >= PIN_BATCH:
                self.flush()
        return outcome

    def flush(self) -> None:
        """Pin the copies noted and not pinned yet."""
        if self.cm is not None and self._waiting:
            waiting, self._waiting = self._waiting, []
            self.cm.pin_files(waiting)


def _deepest_first(directories: list[str]) -> list[str]:
    return sorted(directories, key=lambda uri: uri.count("/"), reverse=True)


def _in_threads(tasks: Sequence[CopyTask], made: Collection[str]) -> Iterator[CopyResult | FileLostError]:
    """Staged copies of ``tasks`` by this process's threads (in the open sync batch), in order."""
    if not tasks:
        return
    workers = target_files(tasks).traits(tasks[0].target_uri).io_parallelism
    with CopyRunner(fresh=made) as runner, ThreadPoolExecutor(max_workers=workers) as pool:
        context = contextvars.copy_context()  # carries the open sync batch into the pool's threads
        yield from bounded_map(pool, lambda task: context.copy().run(_attempt, runner, task), tasks, workers)


class DumpContentMismatchError(DumpValidationError, FileLostError):
    """A file's content is not the one the dump records: the source rewrote it in place after the event (and
    cmroot has no copy), or the dump's checksum was edited. Only reading the file tells, and nothing was
    applied; neither cause goes away by retrying."""


def target_files(tasks: Sequence[CopyTask]) -> RootedFileSystem:
    """The replica's roots the tasks copy into (a load's tasks share them)."""
    return bound(tasks[0].target_roots, "replica files of this load")


def _attempt(runner: CopyRunner, task: CopyTask) -> CopyResult | FileLostError:
    try:
        return runner(task)
    except FileLostError as exc:  # no candidate has the recorded content: reported with the others
        return exc


def _directories_to_make(tasks: Sequence[CopyTask], missing: set[str]) -> list[str]:
    """Directories the staged copies of ``tasks`` will create that ``missing`` (the ones earlier pages
    create) does not hold yet, added to it: removed again on a refusal. Only stores with directories have
    any."""
    made: list[str] = []
    fs = target_files(tasks)
    for parent in {parent_uri(t.target_uri) for t in tasks if fs.traits(t.target_uri).has_directories}:
        while parent and parent != "/" and parent not in missing and not fs.is_directory(parent):
            missing.add(parent)
            made.append(parent)
            parent = parent_uri(parent)
    return made


def pinned_file(task: CopyTask) -> tuple[str, str]:
    """What ``PlacedPins`` pins for a placed copy, and a refusal unpins: its URI and its checksum."""
    return task.target_uri, checksum_of(task.encoded)


def remove_staged(
    pages: TaskPages | Sequence[CopyTask], made: Sequence[str] = (), *, pins: ChangeManager | None = None
) -> None:
    """Delete the staged copies of the tasks of ``pages`` (absent ones are no error), a page at a time, then
    the emptied ``made`` directories (deepest first). ``pins``: the change manager that pinned the placed
    ones (``PlacedPins``): their pins go first, while the copies still tell which cmroot names are theirs."""
    plan: TaskPages = (lambda: [pages]) if isinstance(pages, Sequence) else pages
    fs = None
    try:  # planned again as staged: a dump that fails to read on a page failed there when staged too
        for tasks in plan():
            if not tasks:
                continue
            fs = target_files(tasks)
            if pins is not None:
                pins.unpin_files(pinned_file(task) for task in tasks if task.in_place)
            staged = sorted({task.staged_uri for task in tasks})
            with ThreadPoolExecutor(max_workers=fs.traits(staged[0]).io_parallelism) as pool:
                list(pool.map(fs.delete, staged))
    finally:
        if fs is not None:
            remove_empty(fs, made)


def remove_empty(fs: RootedFileSystem, made: Sequence[str]) -> None:
    """Remove the directories of ``made`` (deepest first) that hold nothing: the others are in use now."""
    for directory in made:
        fs.remove_empty_directory(directory)


def discard_unpublished(tasks: Sequence[CopyTask]) -> int:
    """``discard_staged`` of the tasks' targets (a copier's plan: the Spark load app)."""
    return discard_staged(target_files(tasks), [task.target_uri for task in tasks]) if tasks else 0


def discard_staged(fs: RootedFileSystem, target_uris: Sequence[str]) -> int:
    """Delete the staged copies of ``target_uris`` that the load left unpublished; returns how many were
    deleted. ``fs``: the replica's files.

    A plan can name files that the load then finds already in place, e.g. a renamed table's files, which
    move with its directory on the target too: their staged copies are never published, and the load keeps
    every staged copy of a wanted file. Call this only after the load succeeded (before, a staged copy is
    what a re-run reuses). Each target directory is listed once; nothing else in it is touched.
    """
    staged = {staging_name(uri) for uri in target_uris}
    parents = sorted({uri.rsplit("/", 1)[0] for uri in staged})
    if not parents:
        return 0

    def sweep(parent: str) -> int:
        # Listings are recursive: take only this directory's own entries, so none is counted twice.
        found = [
            s.uri for s in fs.list_files(parent) if s.uri in staged and s.uri.rsplit("/", 1)[0] == parent
        ]
        for uri in found:
            fs.delete(uri)
        return len(found)

    with ThreadPoolExecutor(max_workers=fs.traits(parents[0]).io_parallelism) as pool:
        return sum(pool.map(sweep, parents))
