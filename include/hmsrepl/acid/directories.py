"""Hive's ACID directory layout: names of ``base``/``delta`` directories and which of them a reader sees.

A transactional table never changes a file in place: every write goes into a new directory named after its
write id, and readers decide from the directory names alone, plus their ``ValidWriteIdList``, which
directories make up their snapshot. That is what gives readers snapshot isolation without locks, and why
these names must be exactly Hive's: a Hive, Spark or Trino reader of the same warehouse (or of a replica)
must pick the same directories, or it sees rows that were never committed or misses rows that were.

Everything here is pure (names in, names out), so it is tested exhaustively against a brute-force model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import NamedTuple

from hmsrepl.formats.writeids import MAX_ID, ValidTxnList, ValidWriteIdList

BASE_PREFIX = "base_"
DELTA_PREFIX = "delta_"
DELETE_DELTA_PREFIX = "delete_delta_"
MAX_STATEMENT_ID = 9999
"""Hive formats statement ids with four digits, so a txn may hold at most 10,000 statements per table."""

# Hive pads ids to 7 (statements to 4) digits when writing but parses any number of digits (Long.parseLong),
# so a directory written with wider ids (write id 10,000,000 and up) still parses.
_BASE = re.compile(r"base_([0-9]+)(?:_v([0-9]+))?")
_DELTA = re.compile(r"(delta|delete_delta)_([0-9]+)_([0-9]+)(?:_([0-9]+))?(?:_v([0-9]+))?")


class DirKind(StrEnum):
    BASE = "base"
    DELTA = "delta"
    DELETE_DELTA = "delete_delta"


class ParsedDirectory(NamedTuple):
    """What an ACID directory name says about its contents.

    A base holds the whole table as of its write id, so both ids are that write id. ``statement_id`` is
    ``None`` for names without one (pre-Hive-1.3 deltas, compacted deltas, bases). ``visibility_txn_id`` is
    set on directories a compactor wrote (``_v<txn>`` suffix, Hive 4): they only exist once that txn commits.
    """

    kind: DirKind
    min_write_id: int
    max_write_id: int
    statement_id: int | None = None
    visibility_txn_id: int | None = None


def delta_dir_name(min_write_id: int, max_write_id: int | None = None, statement_id: int | None = 0) -> str:
    """``delta_<min:07d>_<max:07d>_<stmt:04d>``: where one statement of a txn writes appended rows.

    A writer uses ``min == max == its write id`` and statement 0 (single-statement txns); ``statement_id``
    ``None`` gives the statement-less form compactors write.
    """
    high = min_write_id if max_write_id is None else max_write_id
    _check_write_id(min_write_id)
    _check_write_id(high)
    if min_write_id > high:
        raise ValueError(f"delta write id range [{min_write_id}, {high}] is empty: min must not exceed max")
    name = f"{DELTA_PREFIX}{min_write_id:07d}_{high:07d}"
    if statement_id is None:
        return name
    if isinstance(statement_id, bool) or not isinstance(statement_id, int):
        raise ValueError(f"statement id {statement_id!r} is not an integer")
    if not 0 <= statement_id <= MAX_STATEMENT_ID:
        raise ValueError(f"statement id {statement_id} is outside 0..{MAX_STATEMENT_ID} (Hive's 4 digits)")
    return f"{name}_{statement_id:04d}"


def base_dir_name(write_id: int) -> str:
    """``base_<wid:07d>``: what an INSERT OVERWRITE writes; it replaces everything at or below ``write_id``."""
    _check_write_id(write_id)
    return f"{BASE_PREFIX}{write_id:07d}"


def compacted_base_dir_name(write_id: int, visibility_txn_id: int) -> str:
    """``base_<wid:07d>_v<txn:07d>``: a compactor's base, visible only once its txn ``visibility_txn_id``
    committed (Hive 4), so a killed or failed compaction leaves a directory no reader takes."""
    _check_write_id(write_id)
    _check_write_id(visibility_txn_id)
    return f"{base_dir_name(write_id)}_v{visibility_txn_id:07d}"


def compacted_delta_dir_name(min_write_id: int, max_write_id: int, visibility_txn_id: int) -> str:
    """``delta_<min:07d>_<max:07d>_v<txn:07d>``: a minor compaction's merge of the deltas in that range,
    visible only once its txn committed (Hive 4's naming; Hive 3's compactor left out the suffix)."""
    _check_write_id(visibility_txn_id)
    return f"{delta_dir_name(min_write_id, max_write_id, None)}_v{visibility_txn_id:07d}"


def is_compacted_delta(parsed: ParsedDirectory) -> bool:
    """Whether a delta was written by a compactor: a ``_v<txn>`` suffix (Hive 4), or a statement-less range
    of several write ids (Hive 3's minor compactor, and what a bootstrap copies a compacted delta as).

    Writers of insert-only tables write one write id per delta, with a statement id; only a compactor
    merges several, and it merges committed rows only (no aborted write id's rows are in it).
    """
    if parsed.kind is not DirKind.DELTA:
        return False
    return parsed.visibility_txn_id is not None or (
        parsed.statement_id is None and parsed.min_write_id < parsed.max_write_id
    )


def is_valid_delta(parsed: ParsedDirectory, valid_write_ids: ValidWriteIdList) -> bool:
    """Whether a reader may read the delta ``parsed`` whole.

    A writer's delta needs every write id in its range valid: insert-only rows carry no write id to filter
    by. A compactor's delta holds only the committed rows of its range, so aborted ids inside it are fine;
    it needs no id in its range open for the reader (whose snapshot would then predate the compaction) and
    at least one not aborted (Hive takes a wholly aborted range for an aborted write's).
    """
    low, high = parsed.min_write_id, parsed.max_write_id
    if not is_compacted_delta(parsed):
        return valid_write_ids.is_write_id_range_valid(low, high)
    if high > valid_write_ids.high_watermark:
        return False
    if any(low <= w <= high for w in valid_write_ids.open_write_ids):
        return False
    aborted_inside = sum(1 for w in valid_write_ids.aborted_write_ids if low <= w <= high)
    return aborted_inside < high - low + 1


def is_hidden_name(name: str) -> bool:
    """Hive's and Hadoop's rule: ``_``/``.`` names are bookkeeping (``_SUCCESS``, ``.crc``, staging dirs)."""
    return name.startswith(("_", "."))


def looks_like_acid_name(name: str) -> bool:
    """Whether Hive would try to parse ``name`` as a base or delta (and fail the read if it cannot)."""
    return name.startswith((BASE_PREFIX, DELTA_PREFIX, DELETE_DELTA_PREFIX))


def parse_directory_name(name: str) -> ParsedDirectory | None:
    """Parse a base/delta/delete_delta directory name; ``None`` for anything else.

    ``None`` means "not an ACID directory", which for a file directly in a table's location makes it an
    "original" (pre-ACID) file. Names that start like an ACID directory but are malformed also give ``None``;
    ``visible_directories`` refuses them rather than read them as originals.
    """
    match = _BASE.fullmatch(name)
    if match:
        write_id = int(match.group(1))
        if write_id > MAX_ID:
            return None
        return ParsedDirectory(DirKind.BASE, write_id, write_id, None, _optional_id(match.group(2)))
    match = _DELTA.fullmatch(name)
    if match:
        low, high = int(match.group(2)), int(match.group(3))
        statement = _optional_id(match.group(4))
        if low > high or high > MAX_ID or (statement is not None and statement > MAX_STATEMENT_ID):
            return None
        return ParsedDirectory(DirKind(match.group(1)), low, high, statement, _optional_id(match.group(5)))
    return None


def visible_directories(
    dir_names: Iterable[str], valid_write_ids: ValidWriteIdList, *, valid_txns: ValidTxnList | None = None
) -> list[str]:
    """The entries of a table or partition location that make up a reader's snapshot, in read order.

    ``dir_names`` are the names directly in the location (directories and files alike). The reader sees:

    - the newest valid base (``is_valid_base``: an INSERT OVERWRITE writes a base, and an aborted or still
      open overwrite must not hide anything; a compactor's base also needs no write id below it open);
    - every delta above that base whose whole write-id range is valid, except a delta whose range lies
      strictly inside another such delta's: a compactor merges ``delta_1_1`` and ``delta_2_2`` into
      ``delta_1_2`` and the cleaner removes the inputs later, and reading both would double the rows;
    - "original" (pre-ACID) entries, non-ACID names, only when no valid base exists, since a base rewrote
      them.

    Hidden names are never visible. Unlike Hive, a writer's delta spanning an invalid write id is skipped
    entirely (Hive reads it when any id in it is valid): insert-only rows carry no write id to filter by, so
    a partly valid delta cannot be read safely. A compactor's delta may span aborted ids (``is_valid_delta``). Directories with a compactor's visibility suffix need ``valid_txns``
    to tell whether the compaction committed; without it they raise ``ValueError``, as does a name that
    starts like an ACID directory but does not parse (Hive fails such reads as well).

    Order: originals (sorted), the base, then deltas by write id range and statement id.
    """
    bases: list[tuple[int, str]] = []
    deltas: list[tuple[ParsedDirectory, str]] = []
    originals: list[str] = []
    for name in sorted(set(dir_names)):
        if is_hidden_name(name):
            continue
        parsed = parse_directory_name(name)
        if parsed is None:
            if looks_like_acid_name(name):
                raise ValueError(
                    f"'{name}' starts like an ACID directory name but is malformed (expected "
                    "'base_<wid>' or 'delta_<wid>_<wid>[_<stmt>]'); rename or remove it before reading"
                )
            originals.append(name)
            continue
        if not _committed_by_compactor(name, parsed, valid_txns):
            continue
        if parsed.kind is DirKind.BASE:
            if is_valid_base(parsed, valid_write_ids):
                bases.append((parsed.max_write_id, name))
        elif is_valid_delta(parsed, valid_write_ids):
            deltas.append((parsed, name))

    base = max(bases) if bases else None
    floor = base[0] if base else 0
    above_base = [(parsed, name) for parsed, name in deltas if parsed.min_write_id > floor]
    chosen = _drop_covered(above_base)
    out = [] if base else originals
    if base:
        out.append(base[1])
    out.extend(name for _, name in chosen)
    return out


def is_valid_base(parsed: ParsedDirectory, valid_write_ids: ValidWriteIdList) -> bool:
    """Hive's ``isValidBase``: whether a reader may take ``parsed`` (a base) as its starting point.

    An INSERT OVERWRITE's base holds only its own write id's rows, so it is valid when that id is. A
    compactor's base (``_v<txn>`` suffix) holds every committed row up to its write id as the compactor saw
    them; a reader that still takes one of those ids for open (its snapshot predates that commit) would see
    rows it must not, so the reader needs its lowest open write id above the base (Hive's
    ``ValidReaderWriteIdList.isValidBase``) and reads the deltas instead otherwise.
    """
    write_id = parsed.max_write_id
    if parsed.visibility_txn_id is None:
        return valid_write_ids.is_write_id_valid(write_id)
    return write_id < valid_write_ids.min_open_write_id and write_id <= valid_write_ids.high_watermark


def _drop_covered(deltas: list[tuple[ParsedDirectory, str]]) -> list[tuple[ParsedDirectory, str]]:
    """Drop deltas whose range is strictly inside another one's; same-range deltas (statements) all stay.

    Sorted by (min ascending, max descending), every earlier range with a different (min, max) starts at or
    before the current one and, when it starts at the same id, ends later; so it covers the current delta
    exactly when it ends at or after it. Tracking the furthest end of earlier ranges makes this one pass.
    """
    ordered = sorted(deltas, key=lambda item: (item[0].min_write_id, -item[0].max_write_id, _stmt(item)))
    kept: list[tuple[ParsedDirectory, str]] = []
    furthest_end = 0  # over ranges before the current (min, max) group
    group: tuple[int, int] | None = None
    group_end = 0
    for parsed, name in ordered:
        key = (parsed.min_write_id, parsed.max_write_id)
        if key != group:
            furthest_end = max(furthest_end, group_end)
            group, group_end = key, parsed.max_write_id
        if furthest_end >= parsed.max_write_id:
            continue
        kept.append((parsed, name))
    kept.sort(key=lambda item: (item[0].min_write_id, item[0].max_write_id, _stmt(item), item[1]))
    return kept


def _stmt(item: tuple[ParsedDirectory, str]) -> int:
    return -1 if item[0].statement_id is None else item[0].statement_id


def _committed_by_compactor(name: str, parsed: ParsedDirectory, valid_txns: ValidTxnList | None) -> bool:
    if parsed.visibility_txn_id is None:
        return True
    if valid_txns is None:
        raise ValueError(
            f"'{name}' was written by a compactor (visibility txn {parsed.visibility_txn_id}); pass "
            "valid_txns so the reader can tell whether that compaction committed"
        )
    return valid_txns.is_txn_valid(parsed.visibility_txn_id)


def _optional_id(token: str | None) -> int | None:
    return None if token is None else int(token)


def _check_write_id(write_id: int) -> None:
    if isinstance(write_id, bool) or not isinstance(write_id, int):
        raise ValueError(f"write id {write_id!r} is not an integer")
    if not 1 <= write_id <= MAX_ID:
        raise ValueError(f"write id {write_id} is outside 1..{MAX_ID}; write ids start at 1")
