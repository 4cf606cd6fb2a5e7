"""A recorded listing too long to hold, as the encoded files an event or a caller names, read again each walk.

A first capture of a partition of 1,000,000 files records its files a page at a time (``capture``); its
event's ``added`` is that whole listing in path order, some 180 MB of encoded text held as one list. Here it
is a ``LazyArray`` that streams the records back in path order (``listings.stream_sorted``) and encodes each
as the capture did (``encode_at``), when the event is written, a piece at a time (``events.encode_message``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from sqlalchemy import Connection

from hmsrepl.formats.json_text import LazyArray
from hmsrepl.metastore import listings
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.file_capture import encode_at
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.storage.base import FileIdentity

#: Opens the connection a walk reads the records on (the write's own, or a fresh read after it committed).
Reader = Callable[[], AbstractContextManager[Connection]]


def recorded_listing(
    reader: Reader, cm: ChangeManager, key: ObjectKey, location: str, count: int
) -> LazyArray:
    """The ``count`` files recorded for ``key`` at ``location``, encoded in path order on each walk."""

    def make() -> Iterator[str]:
        with reader() as conn:
            for record in listings.stream_sorted(conn, key):
                yield encode_at(
                    cm, location, record.rel_path, FileIdentity(record.checksum, record.version_id)
                )

    return LazyArray(make, count)
