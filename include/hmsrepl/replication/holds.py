"""Where a load may commit in a compacted window, and which position each commit publishes.

Event compaction (``compaction.py``) leaves out events whose effect a later event of the window undoes or
sets again. Loading the rest ends at the source's state as of the window's last event, but not at every
event in between: from a left-out event until the event that makes it redundant, the replica would be
missing what the source had (a table created and dropped in the window never exists on the replica; an
overwrite left out leaves the older files until the next overwrite). Such a range is a *hold*: the event
ids ``first <= id < until`` at which the compacted replica's state is not the source's. A table renamed into
the policy from outside is the same case without compaction: the dump leaves out its events, so the replica
lacks it from that rename until the target follows its name again (its drop, its rename away, a create) or
the dump's end, where it is bootstrapped (``replace.WindowPlanner.arrival_holds``). The dump records its
holds, merged, in its metadata (``DumpMetadata.holds``); ``compaction.compact`` and the planner compute them.

**The rule.** A commit made after applying every written event up to ``applied``, before the next written
event ``next``, publishes as ``repl.last.id`` the first id ``p >= applied`` that no hold covers, provided
``p < next``; if there is none, the load does not commit there, it goes on in the same transaction (a
commit that would show an unfinished compaction is merged with the next). The ids between two written
events are events the dump left out (other databases, other tables, compacted ones), so the replica's state
after ``applied`` is the source's at every uncovered id below ``next``. The dump's last event id is never
covered (a hold ends at an event of the window, and LIMIT and TO cut the window before compaction sees it),
so the last commit always publishes the window's end. With compaction off there are no holds and every
commit publishes its last applied event, as before.

What this decides, in ``load._apply_events``: the cuts a load makes for its own reasons (every
``BATCH_EVENTS`` events, between a table's one-file appends and a change to its shape) happen only where
this rule allows, so the in-place appends and the rest of a window commit together when a hold spans them.
The one cut a load must make (a drop committed before its name is reused,
``event_batches.split_before_reuse``) is never inside a compaction's hold: ``compaction.compact`` keeps every
event of an object whose hold would cover it. A rename-in's hold cannot be given up that way; a reused name
inside one (a drop and re-creation of another table while a renamed-in table waits) is applied in the same
transaction as the rest of the hold (``event_batches._cut_merged``): the drop's directories are retired only
after the commit, and only what no metadata names then, so the re-created object keeps its files.

A dump written before holds were recorded (``holds`` absent) that left events out is held whole: it commits
once, at its end.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hmsrepl.replication.layout import DumpError, DumpMetadata

Span = tuple[int, int]


def merge(spans: Iterable[Span]) -> list[Span]:
    """Sorted, disjoint ``[first, until)`` spans covering the same ids (empty ones dropped)."""
    out: list[Span] = []
    for first, until in sorted(span for span in spans if span[0] < span[1]):
        if out and first <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], until))
        else:
            out.append((first, until))
    return out


@dataclass(frozen=True)
class Holds:
    """A dump's merged holds: the ids at which its compacted state is not the source's."""

    spans: tuple[Span, ...] = ()

    @classmethod
    def of(cls, spans: Iterable[Span]) -> Holds:
        return cls(tuple(merge(spans)))

    @classmethod
    def from_metadata(cls, meta: DumpMetadata, uri: str = "") -> Holds:
        """The holds a dump declares; a dump that left events out without declaring them is held whole."""
        if meta.holds is None:
            if meta.skipped_events:
                return cls(((meta.from_event_id + 1, meta.last_event_id),))
            return cls()
        if not isinstance(meta.holds, list) or not all(_is_span(span) for span in meta.holds):
            raise DumpError(
                f"dump '{uri}' has malformed holds in its metadata (pairs of event ids expected); "
                "the dump is corrupt: dump the window again"
            )
        return cls.of((int(first), int(until)) for first, until in meta.holds)

    def as_metadata(self) -> list[list[int]]:
        return [[first, until] for first, until in self.spans]

    def position(self, applied: int, before: int) -> int | None:
        """The position a commit after ``applied`` publishes when the next written event is ``before``
        (the module's rule), or None: no commit there."""
        position = applied
        for first, until in self.spans:
            if first <= position < until:
                position = until
                break  # merged: the next span starts after this one ends
            if first > position:
                break
        return position if position < before else None


def _is_span(span: object) -> bool:
    return (
        isinstance(span, Sequence)
        and len(span) == 2
        and all(isinstance(value, int) and not isinstance(value, bool) for value in span)
    )
