"""A bootstrap's big partitions are copied while the validation walks the rest of the dump.

A partition of 1,000,000 files is copied by one worker process (``copy_processes``: one directory, one
lane), and the load's own thread waited for it after it had walked and checked the whole dump, each file
looked at by the pre-flight: on two cores, one stayed idle for the whole walk, then the other for the whole
copy. Here the validation hands each page of a partition in a directory of its own on as soon as the page
passed its checks and the pre-flight's look (``DumpValidator``'s ``own_listing_pages``), and a thread of the
load stages it (``prestage.stage_ahead``, the copies verified against their checksums as always) while the
walk goes on. Once the whole dump passed, the same staging goes on with every other object's files.

Nothing of this is applied: the staged copies are hidden names or a version directory no metadata names yet,
as for any copy staged before the load's first change. When the walk refuses the dump later (a page further
on, a file named twice, two objects owning one location) or the pre-flight finds files gone, the staging
stops and removes every copy it made, with the directories made for them, before the refusal is raised. What
it removes is planned again from the dump: the own listings' pages in the walk's order
(``copy_plan.own_listing_objects``) up to as many as it took, so no entry the walk did not pass is ever
planned.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.payloads import metadata_location
from hmsrepl.replication.copy_plan import CopyPlanner, DumpedObject
from hmsrepl.replication.filecopy import CopyTask
from hmsrepl.replication.prestage import COPY_PAGE, StagedAhead, stage_ahead

#: Pages handed on and not yet planned (each at most ``layout.LISTING_PAGE`` entries): the walk waits for
#: the staging beyond these.
PAGES_AHEAD = 8

_END, _STOP = object(), object()


class _Stopped(Exception):
    """The walk refused the dump: the staging stops (and removes what it staged)."""


class StagingAlong:
    """The copies of one bootstrap load, staged in a thread of their own from the first page handed on.

    ``planner()``: the load's copy planner, made in the load's thread once the walk knows the source database
    (it reads the replica's catalog); ``walked()``: the own listings' pages again, in the order they are
    handed on; ``rest()``: every other object's pages, read once the whole dump passed; ``pins``: the
    replica's change manager, pinning the copies placed in new versions (``prestage.PlacedPins``).
    """

    def __init__(
        self,
        planner: Callable[[], CopyPlanner],
        walked: Callable[[], Iterable[DumpedObject]],
        rest: Callable[[], Iterable[DumpedObject]],
        dump_uri: str,
        pins: ChangeManager | None = None,
    ) -> None:
        self._make_planner, self._walked, self._rest, self.dump_uri = planner, walked, rest, dump_uri
        self._pins = pins
        self._planner: CopyPlanner | None = None
        self._pages: queue.Queue[object] = queue.Queue(PAGES_AHEAD)
        self._planned = False  # whether the staging planned its pages once (again: to remove them)
        self._taken = 0  # own listings' pages the staging took
        self._rest_started = False
        self._outcome: StagedAhead | BaseException | None = None
        self._thread: threading.Thread | None = None

    def hand_on(self, document: dict[str, Any], where: str, page: list[str]) -> None:
        """A checked page of the partition ``document`` (its ``_metadata`` at ``where``): staged in turn. A
        staging that failed (a copy process killed, a full disk) fails the walk with its error at once."""
        if self._thread is None:
            self._planner = self._make_planner()
            context = contextvars.copy_context()  # the load's privileges, fault points and sync settings
            self._thread = threading.Thread(
                target=context.run, args=(self._stage,), name="hmsrepl-staging", daemon=True
            )
            self._thread.start()
        if not self._put(DumpedObject(metadata_location(document, where), page, own_listing=True)):
            assert isinstance(self._outcome, BaseException)  # it ended before the walk handed on _END
            raise self._outcome

    def finish(self) -> StagedAhead:
        """Once the whole dump passed: stage every other object's files, wait, and give what was staged, or
        raise what the staging failed with (having removed what it staged)."""
        if self._thread is None:
            self._planner = self._make_planner()
            return stage_ahead(self._pages_to_stage, self.dump_uri, pins=self._pins)
        self._put(_END)
        self._thread.join()
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        assert self._outcome is not None
        return self._outcome

    def stop(self) -> None:
        """The dump was refused (or the load failed) before ``finish``: stop the staging and wait until what
        it staged is removed. Only ``finish`` hands on ``_END``, so the staging cannot have ended with copies
        kept: it takes ``_STOP`` (and removes them) or it failed first (and removed them then)."""
        if self._thread is None:
            return
        self._put(_STOP)
        self._thread.join()

    def _put(self, item: object) -> bool:
        """Hand ``item`` to the staging thread; False when it ended first (its failure is kept)."""
        assert self._thread is not None
        while self._thread.is_alive():
            try:
                self._pages.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _stage(self) -> None:
        """The staging thread: ``stage_ahead`` of the pages as they come (it removes what it staged when it
        fails, here or on ``_STOP``)."""
        try:
            self._outcome = stage_ahead(self._pages_to_stage, self.dump_uri, pins=self._pins)
        except _Stopped:
            self._outcome = None
        except BaseException as exc:  # raised by ``finish`` in the load's thread
            self._outcome = exc

    def _pages_to_stage(self) -> Iterator[list[CopyTask]]:
        """First called, the pages as they come then the rest's; called again (to remove what was staged),
        the pages taken, planned again from the dump, then the rest's if it was started."""
        if not self._planned:
            self._planned = True
            yield from self._plan(self._handed_on())
            self._rest_started = True
            yield from self._plan(self._rest())
            return
        yield from self._plan(islice(self._walked(), self._taken))
        if self._rest_started:
            yield from self._plan(self._rest())

    def _plan(self, objects: Iterable[DumpedObject]) -> Iterator[list[CopyTask]]:
        assert self._planner is not None  # made before the staging starts
        return self._planner.pages(objects, COPY_PAGE)

    def _handed_on(self) -> Iterator[DumpedObject]:
        if self._thread is None:  # nothing was handed on: straight to the rest
            return
        while (item := self._pages.get()) is not _END:
            if item is _STOP:
                raise _Stopped
            assert isinstance(item, DumpedObject)
            self._taken += 1
            yield item
