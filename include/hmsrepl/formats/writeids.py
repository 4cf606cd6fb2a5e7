"""Hive's transaction snapshot strings: ``ValidTxnList`` and ``ValidWriteIdList``.

Hive passes a reader's snapshot between the metastore, query engines and the compactor as these strings,
so a replica has to produce and accept exactly the text Hive does; any other spelling would make Hive
tooling fail or, worse, see a different snapshot. Both are pure values here: the string is the only
serialised form, and every constructor and parser validates, because a snapshot that silently reads
wrong makes uncommitted rows visible or committed rows disappear.

Formats (fields separated by ``:``, ids by ``,``)::

    ValidTxnList      <hwm>:<minOpenTxn>:<open>:<aborted>              10:3:3,4,5,7:8
    ValidWriteIdList  <db.tbl>:<hwm>:<minOpenWriteId>:<open>:<aborted>  db.t:12:7:7,8:12

With nothing open the minimum-open field is ``MAX_ID`` (Java's ``Long.MAX_VALUE``). Trailing empty fields
may be missing on read, because Java's ``String.split`` drops them and Hive parses with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_ID: int = 9223372036854775807
"""Java's ``Long.MAX_VALUE``: Hive's "nothing is open" marker and the largest id a Java reader can hold."""

_TXN_FORMAT = "<hwm>:<minOpenTxn>:<open>:<aborted>"
_WRITE_ID_FORMAT = "<db.tbl>:<hwm>:<minOpenWriteId>:<open>:<aborted>"
_NULL_TABLE = "null"  # what Java's StringBuilder writes for a null table name
_INT = re.compile(r"-?[0-9]+")  # Long.parseLong's shape; '+' and non-ASCII digits are never written by Hive
_RANGE = re.compile(r"([0-9]+)-([0-9]+)")
# Ranges are expanded into sets, so a hostile or corrupt "1-9223372036854775807" must not exhaust memory.
_MAX_EXPANDED_IDS = 10_000_000


class MalformedWriteIdListError(ValueError):
    """A transaction or write-id snapshot string (or the values for one) is invalid.

    Raised rather than guessing, because any guess changes which rows a reader sees. The message quotes the
    offending string and names the part that is wrong, since operators see it as it is.
    """


class _Problem(Exception):
    """What is wrong, before we know whether to phrase it as a parse or a construction error."""


@dataclass(frozen=True)
class ValidTxnList:
    """A reader's view of the global transaction log (Hive's ``ValidReadTxnList``).

    Transactions at or below ``high_watermark`` are committed unless listed as open or aborted; anything
    above it started after the snapshot and is invisible. Any iterables of ints are accepted for the id
    sets and stored as frozensets so the value is hashable and cannot change under a reader.
    """

    high_watermark: int
    open_txns: frozenset[int] = frozenset()
    aborted_txns: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        try:
            open_txns = _coerce_ids(self.open_txns, "open txns")
            aborted_txns = _coerce_ids(self.aborted_txns, "aborted txns")
            _check_snapshot("txn", self.high_watermark, open_txns, aborted_txns)
        except _Problem as problem:
            raise MalformedWriteIdListError(
                f"invalid ValidTxnList(high_watermark={self.high_watermark!r}): {problem}"
            ) from None
        object.__setattr__(self, "open_txns", open_txns)
        object.__setattr__(self, "aborted_txns", aborted_txns)

    @property
    def min_open_txn(self) -> int:
        """Lowest open txn, or ``MAX_ID``: Hive stores it so readers can bound their scans without a sort."""
        return min(self.open_txns, default=MAX_ID)

    @property
    def exceptions(self) -> frozenset[int]:
        """Txns at or below the watermark that are not committed, whichever the reason."""
        return self.open_txns | self.aborted_txns

    def is_txn_valid(self, txn_id: int) -> bool:
        """Same rule as Hive's ``isTxnValid``, so both sides agree on visibility even for odd ids."""
        return (
            txn_id <= self.high_watermark and txn_id not in self.open_txns and txn_id not in self.aborted_txns
        )

    def to_string(self) -> str:
        """Hive's text form, always with all four fields as Hive writes them.

        Ids are written one by one, never as ``a-b`` ranges: only newer Hive releases read ranges, while
        plain ids are read by every release, and a reader that cannot parse the string fails the query.
        """
        return f"{self.high_watermark}:{self.min_open_txn}:{_csv(self.open_txns)}:{_csv(self.aborted_txns)}"

    @classmethod
    def parse(cls, text: str) -> ValidTxnList:
        """Read Hive's text form; ids may be single or inclusive ``a-b`` ranges, as newer Hive writes them.

        Raises ``MalformedWriteIdListError`` for anything Hive would not have written, including the empty
        string: treating "no snapshot" as "everything committed" would expose open and aborted data.
        """
        try:
            fields = _fields(text, required=("high watermark", "minOpenTxn"), allowed=4)
            hwm = _parse_int(fields[0], "high watermark")
            min_open = _parse_int(fields[1], "minOpenTxn")
            open_txns = _parse_ids(_field(fields, 2), "open txns", allow_ranges=True)
            aborted_txns = _parse_ids(_field(fields, 3), "aborted txns", allow_ranges=True)
            _check_snapshot("txn", hwm, open_txns, aborted_txns)
            _check_min_open(min_open, open_txns, "minOpenTxn", "open txns")
        except _Problem as problem:
            raise _malformed("ValidTxnList", text, problem, _TXN_FORMAT) from None
        return cls(hwm, open_txns, aborted_txns)


@dataclass(frozen=True)
class ValidWriteIdList:
    """A reader's view of one table's write ids (Hive's ``ValidReaderWriteIdList``).

    Decides which ``delta_<low>_<high>`` and ``base_<n>`` directories of an ACID table a reader may use.
    ``table_name`` is ``db.table``, lower-cased on construction because Hive names are case-insensitive
    and the string must compare equal however the caller spelled it; ``None`` stands for Hive's ``null``.
    """

    table_name: str | None
    high_watermark: int
    open_write_ids: frozenset[int] = frozenset()
    aborted_write_ids: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        try:
            table_name = None if self.table_name is None else _normalise_table_name(self.table_name)
            open_ids = _coerce_ids(self.open_write_ids, "open write ids")
            aborted_ids = _coerce_ids(self.aborted_write_ids, "aborted write ids")
            _check_snapshot("write id", self.high_watermark, open_ids, aborted_ids)
        except _Problem as problem:
            raise MalformedWriteIdListError(
                f"invalid ValidWriteIdList(table_name={self.table_name!r}, "
                f"high_watermark={self.high_watermark!r}): {problem}"
            ) from None
        object.__setattr__(self, "table_name", table_name)
        object.__setattr__(self, "open_write_ids", open_ids)
        object.__setattr__(self, "aborted_write_ids", aborted_ids)

    @property
    def min_open_write_id(self) -> int:
        """Lowest open write id, or ``MAX_ID``: the compactor must not clean anything at or above it."""
        return min(self.open_write_ids, default=MAX_ID)

    @property
    def exceptions(self) -> frozenset[int]:
        """Write ids at or below the watermark whose data a reader must skip, open or aborted alike."""
        return self.open_write_ids | self.aborted_write_ids

    def is_write_id_valid(self, write_id: int) -> bool:
        """Hive's ``isWriteIdValid`` rule, kept literal so visibility matches Hive's even for write id 0,
        which Hive gives to pre-ACID ("original") files and treats as visible."""
        return (
            write_id <= self.high_watermark
            and write_id not in self.open_write_ids
            and write_id not in self.aborted_write_ids
        )

    def is_write_id_range_valid(self, low: int, high: int) -> bool:
        """True when every id in ``[low, high]`` is valid, i.e. a ``delta_<low>_<high>`` may be read whole.

        Works from the exception sets so that a wide delta (or a huge watermark) costs nothing extra.
        """
        if low > high:
            raise ValueError(f"write id range [{low}, {high}] is empty: low must not exceed high")
        if high > self.high_watermark:
            return False
        return not any(low <= e <= high for e in self.open_write_ids) and not any(
            low <= e <= high for e in self.aborted_write_ids
        )

    def committed_ids(self, max_size: int = 10_000_000) -> set[int]:
        """Every committed write id, for small tables and tests.

        This materialises ``1..high_watermark``, so it refuses watermarks above ``max_size`` instead of
        exhausting memory; compare snapshots with ``compare_committed``, which never materialises.
        """
        if self.high_watermark > max_size:
            raise ValueError(
                f"refusing to list {self.high_watermark} committed write ids of {self.table_name!r} "
                f"(more than max_size={max_size}); use compare_committed or is_write_id_range_valid"
            )
        exceptions = self.exceptions
        return {w for w in range(1, self.high_watermark + 1) if w not in exceptions}

    def to_string(self) -> str:
        """Hive's text form, always with all five fields, as ``ValidReaderWriteIdList`` writes it."""
        name = _NULL_TABLE if self.table_name is None else self.table_name
        return (
            f"{name}:{self.high_watermark}:{self.min_open_write_id}:"
            f"{_csv(self.open_write_ids)}:{_csv(self.aborted_write_ids)}"
        )

    @classmethod
    def parse(cls, text: str) -> ValidWriteIdList:
        """Read Hive's text form. ``null`` (any case) as the name means no table name, as Hive writes it.

        Ids must be plain integers: Hive never writes ranges in write-id lists and its reader rejects them.
        Raises ``MalformedWriteIdListError`` for anything else, the empty string included, since reading
        "no snapshot" as "everything committed" would expose open and aborted data.
        """
        try:
            fields = _fields(text, required=("table name", "high watermark", "minOpenWriteId"), allowed=5)
            table_name = None if fields[0].lower() == _NULL_TABLE else _normalise_table_name(fields[0])
            hwm = _parse_int(fields[1], "high watermark")
            min_open = _parse_int(fields[2], "minOpenWriteId")
            open_ids = _parse_ids(_field(fields, 3), "open write ids", allow_ranges=False)
            aborted_ids = _parse_ids(_field(fields, 4), "aborted write ids", allow_ranges=False)
            _check_snapshot("write id", hwm, open_ids, aborted_ids)
            _check_min_open(min_open, open_ids, "minOpenWriteId", "open write ids")
        except _Problem as problem:
            raise _malformed("ValidWriteIdList", text, problem, _WRITE_ID_FORMAT) from None
        return cls(table_name, hwm, open_ids, aborted_ids)


def compare_committed(a: ValidWriteIdList, b: ValidWriteIdList) -> int | None:
    """Compare the committed write-id sets: 0 if equal, -1 if a's set is a strict subset of b's, 1 if a
    strict superset, None if neither contains the other (incomparable).

    Replication uses this to tell whether a replica's snapshot is behind, equal to, or has diverged from the
    source's. Watermarks can be around 10**12, so it reasons over the watermarks and the exception sets
    only, in time linear in the number of exceptions. Two lists with different watermarks can still be
    equal (``hwm=4`` versus ``hwm=5`` with 5 aborted). Hive's ``TxnIdUtils.compare`` has a sign bug
    (HIVE-24975) and returns +-1 for incomparable lists; this returns None so divergence cannot pass for
    lag. Raises ValueError when the table names differ, because such a comparison has no meaning.
    """
    if a.table_name != b.table_name:
        raise ValueError(
            f"cannot compare write ids of different tables: {a.table_name!r} and {b.table_name!r}"
        )
    a_in_b = _committed_subset(a.high_watermark, a.exceptions, b.high_watermark, b.exceptions)
    b_in_a = _committed_subset(b.high_watermark, b.exceptions, a.high_watermark, a.exceptions)
    if a_in_b and b_in_a:
        return 0
    if a_in_b:
        return -1
    if b_in_a:
        return 1
    return None


def _committed_subset(x_hwm: int, x_exc: frozenset[int], y_hwm: int, y_exc: frozenset[int]) -> bool:
    """Whether ``{1..x_hwm} - x_exc`` is contained in ``{1..y_hwm} - y_exc`` (exceptions lie in 1..hwm)."""
    # Nothing above y's watermark is committed in y, so x must list every id in (y_hwm, x_hwm] as an
    # exception; exceptions are distinct ids in that interval, so counting them is enough.
    if x_hwm > y_hwm and sum(1 for e in x_exc if e > y_hwm) != x_hwm - y_hwm:
        return False
    # Every id y leaves out must be left out by x as well, unless it is beyond x's watermark anyway.
    return all(e > x_hwm or e in x_exc for e in y_exc)


def _malformed(kind: str, text: object, problem: _Problem, expected: str) -> MalformedWriteIdListError:
    return MalformedWriteIdListError(f"malformed {kind} {text!r}: {problem}; expected '{expected}'")


def _fields(text: object, required: tuple[str, ...], allowed: int) -> list[str]:
    """Split like Java's ``String.split(":")``, which Hive uses, so trailing empty fields disappear."""
    if not isinstance(text, str):
        raise _Problem(f"expected a string, got {type(text).__name__}")
    if text == "":
        raise _Problem("the string is empty; an absent snapshot must not be read as 'everything committed'")
    fields = text.split(":")
    while fields and fields[-1] == "":
        fields.pop()
    if len(fields) < len(required):
        missing = ", ".join(required[len(fields) :])
        raise _Problem(f"found {len(fields)} field(s), not counting trailing empty ones; missing {missing}")
    if len(fields) > allowed:
        raise _Problem(f"found {len(fields)} fields, at most {allowed} are allowed")
    return fields


def _field(fields: list[str], index: int) -> str:
    return fields[index] if index < len(fields) else ""


def _parse_int(token: str, what: str) -> int:
    if not _INT.fullmatch(token):
        raise _Problem(f"{what} {token!r} is not an integer")
    try:
        return int(token)
    except ValueError:  # more digits than Python will convert; far beyond a Java long anyway
        raise _Problem(f"{what} {token[:30]!r}... is out of range") from None


def _parse_ids(token: str, what: str, *, allow_ranges: bool) -> frozenset[int]:
    """Parse a comma-separated id list; ``a-b`` (inclusive) items only where Hive may write them."""
    if token == "":
        return frozenset()
    ids: set[int] = set()
    expected_count = 0
    for item in token.split(","):
        match = _RANGE.fullmatch(item) if allow_ranges else None
        if match:
            start = _parse_int(match.group(1), f"start of range {item!r} in {what}")
            end = _parse_int(match.group(2), f"end of range {item!r} in {what}")
            if start > end:
                raise _Problem(f"range {item!r} in {what} runs backwards")
            if expected_count + (end - start + 1) > _MAX_EXPANDED_IDS:
                raise _Problem(f"{what} expand to more than {_MAX_EXPANDED_IDS} ids")
            ids.update(range(start, end + 1))
            expected_count += end - start + 1
        else:
            kind = "an integer or an 'a-b' range" if allow_ranges else "an integer"
            if not _INT.fullmatch(item):
                raise _Problem(f"item {item!r} in {what} is not {kind}")
            ids.add(_parse_int(item, f"item in {what}"))
            expected_count += 1
        if len(ids) != expected_count:
            raise _Problem(f"item {item!r} in {what} repeats an id listed earlier")
    return frozenset(ids)


def _coerce_ids(value: object, what: str) -> frozenset[int]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise _Problem(f"{what} must be a collection of integers, got {type(value).__name__}")
    ids = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise _Problem(f"{what} contain {item!r}, which is not an integer")
        ids.append(int(item))
    return frozenset(ids)


def _check_snapshot(noun: str, hwm: object, open_ids: frozenset[int], aborted_ids: frozenset[int]) -> None:
    """The invariants Hive's readers assume but do not check; breaking them changes visibility silently."""
    if isinstance(hwm, bool) or not isinstance(hwm, int):
        raise _Problem(f"high watermark {hwm!r} is not an integer")
    if hwm < 0:
        raise _Problem(f"high watermark {hwm} is negative")
    if hwm > MAX_ID:
        raise _Problem(f"high watermark {hwm} exceeds the largest Java long {MAX_ID}")
    for state, ids in (("open", open_ids), ("aborted", aborted_ids)):
        if ids and min(ids) < 1:
            raise _Problem(f"{state} {noun} {min(ids)} is not positive")
        if ids and max(ids) > hwm:
            raise _Problem(f"{state} {noun} {max(ids)} is above the high watermark {hwm}")
    both = open_ids & aborted_ids
    if both:
        raise _Problem(f"{noun} {min(both)} is listed as both open and aborted")


def _check_min_open(min_open: int, open_ids: frozenset[int], field: str, what: str) -> None:
    expected = min(open_ids, default=MAX_ID)
    if min_open != expected:
        detail = f"the lowest of {what}" if open_ids else f"{MAX_ID} because no {what} are listed"
        raise _Problem(f"{field} {min_open} does not match {expected}, {detail}")


def _normalise_table_name(name: object) -> str:
    if not isinstance(name, str):
        raise _Problem(f"table name {name!r} is not a string")
    # ':' would shift every later field; '$' separates tables where Hive joins several lists into one string.
    for separator in ":$":
        if separator in name:
            raise _Problem(f"table name {name!r} contains {separator!r}")
    # Requiring "db.table" catches bare table names early, and keeps a real name from ever being 'null'.
    db, dot, table = name.partition(".")
    if not dot or not db or not table:
        raise _Problem(f"table name {name!r} is not of the form 'db.table'")
    return name.lower()


def _csv(ids: frozenset[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))
