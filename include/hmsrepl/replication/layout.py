"""The dump directory: what REPL DUMP writes and REPL LOAD reads.

    <dump>/_dumpmetadata                     kind, policy, event range, source roots, settings; incremental:
                                             the ``holds`` where no load may commit (holds.py)
    <dump>/_finished_dump                    written last: a dump without it is incomplete
    <dump>/_signature                        with a signing key: manifest and HMAC of the rest (signing.py)
    bootstrap:
    <dump>/<db>/_metadata                    the database
    <dump>/<db>/_acid_state                  open txns and each ACID table's write-id state (acid_replay.py)
    <dump>/<db>/_functions/<name>/_metadata  each function
    <dump>/<db>/<table>/_metadata            the table (as of the dump's last event id)
    <dump>/<db>/<table>/_files               unpartitioned table: encoded file URIs, one per line
    <dump>/<db>/<table>/_column_stats        the table's column statistics (column_stats.py)
    <dump>/<db>/<table>/_partitions/<page>   its partitions, up to PAGE_PARTITIONS a page, one JSON document a
                                             line: {"partition": snapshot, "files": [encoded, ...]} ("files"
                                             absent: metadata only); pages are read in name order
    <dump>/<db>/<table>/<k=v/...>/_metadata  a partition of more than PAGE_FILES files, under its Hive
    <dump>/<db>/<table>/<k=v/...>/_files     partition name (layout format 2 and older: every partition)
    incremental:
    <dump>/events/<first event id>/_events   a segment: up to SEGMENT_EVENTS consecutive events of the dump, one
                                             JSON document a line in event id order, each the event with its
                                             own object snapshot and the files it needs (pseudo-snapshot)
    <dump>/_bootstrap/<db>/<table>/...       tables bootstrapped inside the incremental dump (newly included
                                             by REPLACE, renamed into the policy), as of the dump's last event
                                             id, laid out as in a bootstrap dump; _dumpmetadata lists them in
                                             ``bootstrapped_tables`` (a listed table absent here is dropped)

``_files`` hold ``fileuri#checksum#cmroot#subdir`` lines: indirections to the source's files, never copies.
A bootstrap's ``_files`` is the object's full listing as of the dump's last event id; an event's ``files``
list the files that event adds (``Message.files``: a format-1 message's listing, a format-2 delta's
``added``), and its ``message`` is the message as the log stored it. ``DumpLayout`` builds every one of these
paths.

Partitions come in pages for the same reason: a bootstrap of 100,000 partitions would otherwise write and
read 200,000 small files. A partition with a large listing keeps its own ``_metadata`` and ``_files`` (a page
stays within the reader's document bound), and dumps of layout format 2 (a directory per partition) still
load: ``DumpDir.partitions`` reads both.

Events come in segments because a file and a directory per event bound a dump by file-system calls (half a
millisecond each on a busy disk): a segment holds a thousand events. Dumps of layout format 1 (one
``events/<event id>/_metadata`` and ``_files`` per event) still load: ``DumpDir.read_segment`` reads both.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats.bounded import json_depth
from hmsrepl.formats.json_text import dumps_sorted, loads
from hmsrepl.metastore.applied_files import ListingPages
from hmsrepl.metastore.event_specs import SPECS
from hmsrepl.metastore.recorded_pages import RecordedPages, UnrecordedFilesError
from hmsrepl.storage.base import join_uri, relative_to
from hmsrepl.storage.rooted import RootedFileSystem

FORMAT_VERSION = 3
# format 1: a directory per event (events/<event id>/_metadata and _files); 2: a directory per partition
READABLE_FORMATS = (1, 2, 3)
DUMP_METADATA = "_dumpmetadata"
ACK = "_finished_dump"
SIGNATURE = "_signature"
METADATA = "_metadata"
FILES = "_files"
EVENTS_DIR = "events"
SEGMENT = "_events"
SEGMENT_EVENTS = 1000  # events of one segment at most
SEGMENT_BYTES = 8 * 1024 * 1024  # a segment is closed once it holds this much (one event may exceed it)
FUNCTIONS_DIR = "_functions"
BOOTSTRAP_DIR = "_bootstrap"
ACID_STATE = "_acid_state"
PARTITIONS_DIR = "_partitions"
PAGE_PARTITIONS = 5000  # partitions of one page at most
PAGE_FILES = 10_000  # a partition listing more files is written on its own, not into a page
DATABASE, FUNCTION, TABLE, PARTITION = "database", "function", "table", "partition"


@dataclass(frozen=True)
class DumpEntry:
    """What one ``_metadata`` below a database describes, by its place in the layout."""

    kind: str  # DATABASE, FUNCTION, TABLE or PARTITION ("" for a path the layout never writes)
    table: str | None = None  # the table of a TABLE or PARTITION entry
    partition: str | None = None  # the Hive partition name of a PARTITION entry


class DumpLayout:
    """Where each part of a dump lives: the only code that builds or takes apart a dump's relative paths.

    Pure functions (no I/O): ``DumpDir`` reads and writes what they name. Paths are relative to the dump
    directory, or to ``BOOTSTRAP_DIR`` for the tables an incremental dump bootstraps (``DumpDir.bootstrap_part``).
    """

    @staticmethod
    def database(db: str) -> str:
        return f"{db}/{METADATA}"

    @staticmethod
    def acid_state(db: str) -> str:
        return f"{db}/{ACID_STATE}"

    @staticmethod
    def function_dir(db: str, name: str) -> str:
        return f"{db}/{FUNCTIONS_DIR}/{name}"

    @classmethod
    def function(cls, db: str, name: str) -> str:
        return f"{cls.function_dir(db, name)}/{METADATA}"

    @staticmethod
    def table_dir(db: str, table: str) -> str:
        return f"{db}/{table}"

    @classmethod
    def table(cls, db: str, table: str) -> str:
        return f"{cls.table_dir(db, table)}/{METADATA}"

    @classmethod
    def partition(cls, db: str, table: str, partition_name: str) -> str:
        return f"{cls.table_dir(db, table)}/{partition_name}/{METADATA}"

    @classmethod
    def partitions_dir(cls, db: str, table: str) -> str:
        return f"{cls.table_dir(db, table)}/{PARTITIONS_DIR}"

    @classmethod
    def partition_page(cls, db: str, table: str, number: int) -> str:
        """The ``number``-th page of a table's partitions (names sort in page order)."""
        return f"{cls.partitions_dir(db, table)}/{number:06d}"

    @staticmethod
    def files_of(metadata: str) -> str:
        """The ``_files`` beside a ``_metadata`` (the object's listing)."""
        return metadata[: -len(METADATA)] + FILES

    @staticmethod
    def beside(metadata: str, name: str) -> str:
        """Another document of the object a ``_metadata`` describes (e.g. its column statistics)."""
        return metadata[: -len(METADATA)] + name

    @staticmethod
    def segment(first_event_id: int) -> str:
        """The segment of events starting at ``first_event_id``."""
        return f"{EVENTS_DIR}/{first_event_id}/{SEGMENT}"

    @staticmethod
    def event(event_id: int) -> str:
        """Layout format 1: one event's ``_metadata``."""
        return f"{EVENTS_DIR}/{event_id}/{METADATA}"

    @classmethod
    def event_files(cls, event_id: int) -> str:
        """Layout format 1: the files of one event."""
        return cls.files_of(cls.event(event_id))

    @staticmethod
    def entry(metadata: str) -> DumpEntry:
        """What the ``_metadata`` at ``<db>/...`` describes (kind "" for a place the layout never writes)."""
        parts = metadata.split("/")
        if parts[-1] != METADATA or len(parts) < 2:
            return DumpEntry("")
        if len(parts) == 2:
            return DumpEntry(DATABASE)
        if parts[1] == FUNCTIONS_DIR:
            return DumpEntry(FUNCTION if len(parts) == 4 else "")
        if len(parts) == 3:
            return DumpEntry(TABLE, parts[1])
        return DumpEntry(PARTITION, parts[1], "/".join(parts[2:-1]))


class DumpError(HmsReplError):
    """A dump directory is missing, incomplete or malformed."""


@dataclass(frozen=True)
class DumpedEvent:
    """One event as a dump holds it: its document (the message as logged), the files it needs, and where."""

    where: str  # the segment and line (format 1: the event's _metadata), for messages
    document: Any  # a dict when well formed; validation refuses anything else
    files: Any  # a list of encoded file entries when well formed
    size: int  # bytes of its JSON, counted against a reader's budget


@dataclass(frozen=True)
class DumpedPartition:
    """One partition as a bootstrap dump holds it: its document, its files, and where it is written."""

    where: str  # the page and line, or the partition's own _metadata, for messages
    document: Any  # {"partition": snapshot} when well formed; validation refuses anything else
    files: Any  # a list of encoded file entries when well formed; None: metadata only


#: A listing the dump writes: held, or a long recorded one walked as it is written.
DumpListing = list[str] | RecordedPages


def _lines(encoded: list[str]) -> bytes:
    """Encoded files as ``_files`` lines."""
    return "".join(f"{line}\n" for line in encoded).encode()


def encode_partition(snapshot: dict[str, Any], files: list[str] | None) -> bytes:
    """One page line: the partition's snapshot with its files (None: no ``files`` key)."""
    body: dict[str, Any] = {"partition": snapshot}
    if files is not None:
        body["files"] = files
    return dumps_sorted(body)


def encode_event(document: dict[str, Any], files: list[str]) -> bytes:
    """One segment line: the event's document with its files (none: no ``files`` key)."""
    body = {**document, "files": files} if files else document
    spec = SPECS.get(document.get("event_type"))  # type: ignore[arg-type]
    return dumps_sorted(body, exact_floats=spec is None or spec.floats)


class SegmentWriter:
    """Groups a dump's events, given in event id order, into segments, and hands each full one to ``write``.

    ``write(first_event_id, lines)`` stores one segment (``DumpDir.write_segment``, possibly on a thread).
    """

    def __init__(self, write: Callable[[int, list[bytes]], object]) -> None:
        self.write = write
        self.first: int | None = None
        self.lines: list[bytes] = []
        self.size = 0

    def add(self, event_id: int, document: dict[str, Any], files: list[str]) -> None:
        if self.first is None:
            self.first = event_id
        line = encode_event(document, files)
        self.lines.append(line)
        self.size += len(line)
        if len(self.lines) >= SEGMENT_EVENTS or self.size >= SEGMENT_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write what is gathered as one segment (called once more after the last event)."""
        if self.first is not None:
            self.write(self.first, self.lines)
        self.first, self.lines, self.size = None, [], 0


def _env_int(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, default))
    except ValueError as exc:
        raise DumpError(f"{name}={os.environ.get(name)!r} is not an integer; fix the setting") from exc
    if value <= 0:
        raise DumpError(f"{name}={value} must be positive; fix the setting")
    return value


READ_CHUNK = 1024 * 1024
#: Lines of a ``_files`` listing a paged reader takes at a time (``DumpDir.files_pages``).
LISTING_PAGE = 10_000


@dataclass(frozen=True)
class DumpLimits:
    """Bounds on what a load reads from a dump, checked before parsing (a dump is untrusted input).

    The defaults hold far more than this product's dumps need (an ADD_PARTITION event of 500 partitions
    with their file lists is a few MB) while keeping a hostile dump from exhausting the loader.
    """

    max_metadata_bytes: int = 256 * 1024 * 1024  # one _metadata / _dumpmetadata / _acid_state / _events
    max_files_bytes: int = 1024 * 1024 * 1024  # one _files
    max_json_depth: int = 64
    max_events: int = 1_000_000  # events of one incremental dump
    max_name_chars: int = 128  # database, table, function, partition key names
    max_value_chars: int = 1024  # one partition value
    max_location_chars: int = 4096

    @classmethod
    def from_environment(cls) -> DumpLimits:
        """``HMSREPL_DUMP_MAX_METADATA_BYTES``, ``..._FILES_BYTES``, ``..._JSON_DEPTH``, ``..._EVENTS``."""
        default = cls()
        return cls(
            max_metadata_bytes=_env_int("HMSREPL_DUMP_MAX_METADATA_BYTES", default.max_metadata_bytes),
            max_files_bytes=_env_int("HMSREPL_DUMP_MAX_FILES_BYTES", default.max_files_bytes),
            max_json_depth=_env_int("HMSREPL_DUMP_MAX_JSON_DEPTH", default.max_json_depth),
            max_events=_env_int("HMSREPL_DUMP_MAX_EVENTS", default.max_events),
        )


@dataclass
class DumpMetadata:
    kind: str  # "bootstrap" or "incremental"
    db_name: str
    policy: str
    from_event_id: int
    to_event_id: int
    last_event_id: int
    event_count: int = 0
    source_warehouse: str = ""
    source_cmroot: str = ""
    replaced_policy: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    skipped_events: int = 0  # events of the window left out by compaction (compaction.py)
    bootstrapped_tables: list[str] = field(default_factory=list)  # incremental: tables under BOOTSTRAP_DIR
    # incremental: [first, until) event ids at which the compacted window's state is not the source's, where
    # no load commits (holds.py); None: a dump written before holds were recorded
    holds: list[list[int]] | None = None
    created: float = field(default_factory=time.time)
    format: int = FORMAT_VERSION

    @property
    def metadata_only(self) -> bool:
        return self.settings.get("hive.repl.dump.metadata.only", "false").lower() == "true"


class DumpDir:
    """Reads and writes one dump directory (local or any storage scheme)."""

    def __init__(self, uri: str, limits: DumpLimits | None = None) -> None:
        self.uri = uri.rstrip("/")
        self.fs = RootedFileSystem([self.uri], purpose=f"dump '{self.uri}'")
        self.limits = limits or DumpLimits.from_environment()

    def _read_bounded(self, uri: str, limit: int, setting: str) -> bytes:
        """The file's bytes, refused past ``limit``."""
        return b"".join(self._bounded_chunks(uri, limit, setting))

    def _bounded_chunks(self, uri: str, limit: int, setting: str) -> Iterator[bytes]:
        """The file's bytes a chunk at a time, refused as soon as they pass ``limit``: memory follows the file
        (or the caller's use of it), not the limit (one ``read(limit + 1)`` allocates the whole limit up
        front: 1 GiB for every ``_files``)."""
        total = 0
        with self.fs.open_read(uri) as stream:
            while chunk := stream.read(min(READ_CHUNK, limit + 1 - total)):
                total += len(chunk)
                if total > limit:
                    raise DumpError(
                        f"dump file '{uri}' is larger than {limit} bytes, the most a load reads ({setting}); "
                        "the dump is corrupt or hostile"
                    )
                yield chunk

    def path(self, *parts: str) -> str:
        return join_uri(self.uri, *parts)

    def _write(self, relative: str, data: bytes) -> None:
        uri = self.path(relative)
        self.fs.write_unsynced(uri, data)  # acknowledge() syncs once: a dump counts only once acknowledged

    def write_json(self, relative: str, body: dict[str, Any]) -> None:
        self._write(relative, json.dumps(body, separators=(",", ":"), sort_keys=True).encode())

    def read_json(self, relative: str) -> dict[str, Any]:
        return self.read_json_sized(relative)[0]

    def read_json_sized(self, relative: str) -> tuple[dict[str, Any], int]:
        """The document and its size in bytes (what a reader keeping documents counts against its budget)."""
        uri = self.path(relative)
        data = self._read_document(uri)
        return self._parse_json(data, uri), len(data)

    def _read_document(self, uri: str) -> bytes:
        """A ``_metadata``-sized file's bytes: bounded, and missing or unreadable as a one-line dump error."""
        try:
            return self._read_bounded(uri, self.limits.max_metadata_bytes, "HMSREPL_DUMP_MAX_METADATA_BYTES")
        except DumpError:
            raise
        except (OSError, HmsReplError) as exc:
            raise DumpError(
                f"dump file '{uri}' is missing or unreadable; the dump is incomplete: {exc}"
            ) from exc

    def _parse_json(self, data: bytes, where: str) -> Any:
        """One JSON document, refused when corrupt or nested deeper than the limit."""
        limit = self.limits.max_json_depth
        try:
            body = loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DumpError(f"dump file '{where}' is not valid JSON (corrupt dump): {exc}") from exc
        except RecursionError:
            body = None
        # No container nests deeper than the document has openers: most documents need no walk.
        if body is None or (data.count(b"{") + data.count(b"[") > limit and json_depth(body, limit) > limit):
            raise DumpError(
                f"dump file '{where}' nests JSON deeper than {limit} levels (HMSREPL_DUMP_MAX_JSON_DEPTH)"
            )
        return body

    def write_files(self, relative: str, encoded: DumpListing) -> None:
        """A ``_files`` listing, one encoded file a line; a long recorded one (``RecordedPages``) written a
        page at a time as it is walked, or, where the location holds files never recorded, described whole."""
        if isinstance(encoded, RecordedPages):
            try:
                self.fs.write_unsynced_pieces(self.path(relative), (_lines(page) for page in encoded))
                return
            except UnrecordedFilesError:
                encoded = encoded.held()
        self._write(relative, _lines(encoded))

    def read_files(self, relative: str) -> list[str]:
        return [line for page in self.files_pages(relative) for line in page]

    def files_pages(self, relative: str, page: int = LISTING_PAGE) -> Iterator[list[str]]:
        """The listing at ``relative`` (none when it is absent) in pages of at most ``page`` lines, read as the
        caller takes them: a listing of 1,000,000 files is never held whole (some 170 MB of lines)."""
        uri = self.path(relative)
        if self.fs.exists(uri):
            yield from self._line_pages(uri, page)

    def _read_lines(self, uri: str) -> list[str]:
        """The listing's lines, refused past ``max_files_bytes``."""
        return [line for page in self._line_pages(uri, LISTING_PAGE) for line in page]

    def _line_pages(self, uri: str, page: int) -> Iterator[list[str]]:
        """The listing's lines in pages of at most ``page``, refused past ``max_files_bytes``. Split a chunk at
        a time as it is read: the file's bytes and their decoded text are never held whole beside the lines
        (a listing of 1,000,000 files is some 170 MB of each, and the lines as much again)."""
        lines: list[str] = []
        cut_line: list[bytes] = []  # a line the chunks cut (a newline never falls inside a UTF-8 character)
        chunks = self._bounded_chunks(uri, self.limits.max_files_bytes, "HMSREPL_DUMP_MAX_FILES_BYTES")
        try:
            for chunk in chunks:
                end = chunk.rfind(b"\n") + 1
                if not end:  # joined once its end comes, never chunk by chunk
                    cut_line.append(chunk)
                    continue
                text = b"".join([*cut_line, chunk[:end]]).decode()
                cut_line = [chunk[end:]]
                lines.extend(line for line in text.split("\n") if line)
                while len(lines) >= page:
                    yield lines[:page]
                    del lines[:page]
            last = b"".join(cut_line)
            if last:
                lines.append(last.decode())
        except UnicodeDecodeError as exc:
            raise DumpError(f"dump file '{uri}' is not UTF-8 text (corrupt dump): {exc}") from exc
        if lines:
            yield lines

    def write_metadata(self, meta: DumpMetadata) -> None:
        self.write_json(DUMP_METADATA, asdict(meta))

    def read_metadata(self) -> DumpMetadata:
        if not self.fs.exists(self.path(DUMP_METADATA)):
            raise DumpError(f"'{self.uri}' is not a dump directory (no {DUMP_METADATA}); check the path")
        body = self.read_json(DUMP_METADATA)
        if not isinstance(body, dict) or body.get("format") not in READABLE_FORMATS:
            found = body.get("format") if isinstance(body, dict) else None
            readable = " and ".join(map(str, READABLE_FORMATS))
            raise DumpError(f"dump '{self.uri}' has format {found}, this version reads {readable}")
        try:
            return DumpMetadata(**body)
        except TypeError as exc:
            raise DumpError(f"dump '{self.uri}' has a malformed {DUMP_METADATA}: {exc}") from exc

    def acknowledge(self) -> None:
        """Declare the dump complete; with ``HMSREPL_DUMP_SIGNING_KEY`` set, sign it first (``signing``)."""
        from hmsrepl.replication import signing

        key = signing.signing_key()
        if key is not None:
            signing.sign(self, key)
        self.fs.sync_tree(
            self.uri
        )  # everything written so far is on disk before the dump is declared complete
        self.fs.write_bytes(self.path(ACK), b"")

    def require_complete(self) -> DumpMetadata:
        meta = self.read_metadata()
        if not self.fs.exists(self.path(ACK)):
            raise DumpError(
                f"dump '{self.uri}' has no {ACK} acknowledgement: it was interrupted or is still being written; "
                "run REPL DUMP again"
            )
        return meta

    def metadata_files(self, relative: str) -> Iterator[str]:
        """Relative paths of every ``_metadata`` below ``relative``, sorted."""
        yield from sorted(name for name in self.files_below(relative) if name.rsplit("/", 1)[-1] == METADATA)

    def tree_order(self, relative: str) -> list[str]:
        """``metadata_files`` of ``relative`` shallowest first, as a bootstrap's tree is walked: a table before
        its partitions, whose directories may sort before its ``_metadata`` ('%', digits)."""
        return sorted(self.metadata_files(relative), key=lambda rel: rel.count("/"))

    def own_listings(self, db: str) -> Iterator[tuple[str, Iterator[list[str]]]]:
        """The partitions of a bootstrap's ``db`` in directories of their own (``_metadata`` path, listing in
        pages), in the order of ``tree_order``: the order its validation hands their pages on."""
        for relative in self.tree_order(db):
            if DumpLayout.entry(relative).kind == PARTITION:
                yield relative, self.files_pages(DumpLayout.files_of(relative))

    def event_segments(self, layout_format: int) -> list[tuple[int, str]]:
        """Each segment's first event id and path, in event id order (format 1: each event's ``_metadata``)."""
        segments = []
        for relative in self.files_below(EVENTS_DIR):
            parts = relative.split("/")
            wanted = SEGMENT if layout_format >= 2 else METADATA
            if len(parts) == 3 and parts[2] == FILES and layout_format < 2:
                continue
            if len(parts) != 3 or not parts[1].isdigit() or parts[2] != wanted:
                raise DumpError(
                    f"dump '{self.uri}' has '{relative}', which is not {EVENTS_DIR}/<event id>/{wanted}"
                )
            segments.append((int(parts[1]), relative))
        return sorted(segments)

    def files_below(self, relative: str) -> list[str]:
        """Relative paths of every file below ``relative``."""
        return [relative_to(status.uri, self.uri) for status in self.fs.list_files(self.path(relative))]

    def read_segment(self, relative: str, layout_format: int) -> list[DumpedEvent]:
        """The events of one segment (format 1: the one event at ``relative`` with its ``_files``)."""
        if layout_format < 2:
            document, size = self.read_json_sized(relative)
            files = self.read_files(DumpLayout.files_of(relative))
            return [DumpedEvent(relative, document, files, size)]
        uri = self.path(relative)
        data = self._read_document(uri)
        events = []
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line:
                where = f"{relative} line {number}"
                document = self._parse_json(line, f"{uri} line {number}")
                files = document.pop("files", []) if isinstance(document, dict) else []
                events.append(DumpedEvent(where, document, files, len(line)))
        return events

    def write_segment(self, first_event_id: int, lines: list[bytes]) -> None:
        """One segment of encoded events (``encode_event``), starting at ``first_event_id``."""
        self._write(DumpLayout.segment(first_event_id), b"".join(line + b"\n" for line in lines))

    def remove_tree(self, relative: str) -> None:
        self.fs.delete_tree(self.path(relative))

    def exists(self, relative: str) -> bool:
        return self.fs.exists(self.path(relative))

    def bootstrap_part(self) -> DumpDir:
        """The tables an incremental dump bootstraps, laid out as a bootstrap dump (``BOOTSTRAP_DIR``)."""
        return DumpDir(self.path(BOOTSTRAP_DIR), limits=self.limits)

    def entries(self, relative: str) -> Iterator[tuple[str, DumpEntry]]:
        """Each ``_metadata`` below ``relative`` (a database or a table directory) with what it describes."""
        for metadata in self.metadata_files(relative):
            yield metadata, DumpLayout.entry(metadata)

    def write_partitions(
        self,
        db: str,
        table: str,
        first_page: int,
        parts: Iterable[tuple[str, dict[str, Any], DumpListing | None]],
    ) -> int:
        """A table's partitions (name, snapshot, files) as pages numbered from ``first_page``, a partition
        listing more than PAGE_FILES files in its own directory; returns the next page's number."""
        page: list[bytes] = []
        number = first_page
        for name, snapshot, files in parts:
            if isinstance(files, RecordedPages) or (files is not None and len(files) > PAGE_FILES):
                self.write_object(DumpLayout.partition(db, table, name), {"partition": snapshot}, files)
                continue
            page.append(encode_partition(snapshot, files))
            if len(page) == PAGE_PARTITIONS:
                self._write(DumpLayout.partition_page(db, table, number), b"\n".join(page) + b"\n")
                page, number = [], number + 1
        if page:
            self._write(DumpLayout.partition_page(db, table, number), b"\n".join(page) + b"\n")
            number += 1
        return number

    def partitions(self, table_dir: str) -> Iterator[DumpedPartition]:
        """A bootstrapped table's partitions (``table_dir``: ``<db>/<table>``): its pages in order, then those
        written in their own directories (large listings; every partition of a format-2 dump)."""
        for dumped, listing in self.partition_listings(table_dir):
            yield dumped if listing is None else replace(dumped, files=self.read_listing(dumped.where))

    def partitions_paged(self, table_dir: str) -> Iterator[DumpedPartition]:
        """``partitions``, a listing written in its own directory left in the dump: its ``files`` are a
        ``ListingPages`` reading it a page at a time, again for each walk (a bootstrap load of a partition of
        1,000,000 files never holds its listing)."""
        for dumped, listing in self.partition_listings(table_dir):
            files_at = DumpLayout.files_of(dumped.where)
            if listing is None or not self.exists(files_at):
                yield dumped
                continue
            read = functools.partial(self.files_pages, files_at)
            yield replace(dumped, files=ListingPages(read, self.path(files_at)))

    def partition_listings(
        self, table_dir: str
    ) -> Iterator[tuple[DumpedPartition, Iterator[list[str]] | None]]:
        """``partitions``, each with its listing in pages (``files_pages``) when it is in its own directory
        (its ``files`` then None: a listing of 1,000,000 files is read as the caller takes its pages), else
        None (a page's partition, whose few files come with it)."""
        for page in self.partition_pages(table_dir):
            for dumped in self.read_partition_page(page):
                yield dumped, None
        for metadata in self.metadata_files(table_dir):
            if metadata.count("/") > table_dir.count("/") + 1:  # not the table's own _metadata
                listing = self.files_pages(DumpLayout.files_of(metadata))
                yield DumpedPartition(metadata, self.read_json(metadata), None), listing

    def partition_pages(self, table_dir: str) -> list[str]:
        """The partition pages of the table at ``table_dir`` (``<db>/<table>``), in page order."""
        pages = f"{table_dir}/{PARTITIONS_DIR}"
        if not self.exists(pages):
            return []
        return sorted(name for name in self.files_below(pages) if "/" not in name[len(pages) + 1 :])

    def read_partition_page(self, relative: str) -> list[DumpedPartition]:
        """The partitions of one page, bounded as any ``_metadata`` (one line each)."""
        uri = self.path(relative)
        data = self._read_document(uri)
        out = []
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line:
                document = self._parse_json(line, f"{uri} line {number}")
                files = document.pop("files", None) if isinstance(document, dict) else None
                out.append(DumpedPartition(f"{relative} line {number}", document, files))
        return out

    def write_object(self, metadata: str, document: dict[str, Any], files: DumpListing | None) -> None:
        """A table's or partition's ``_metadata`` and, unless ``files`` is None, its ``_files`` listing."""
        self.write_json(metadata, document)
        if files is not None:
            self.write_files(DumpLayout.files_of(metadata), files)

    def read_listing(self, metadata: str) -> list[str] | None:
        """The ``_files`` of the object at ``metadata``, None when the dump holds none for it."""
        uri = self.path(DumpLayout.files_of(metadata))
        return self._read_lines(uri) if self.fs.exists(uri) else None
