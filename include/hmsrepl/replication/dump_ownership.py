"""The ownership rule for locations, applied to what a dump declares (before a load changes anything).

The catalog refuses a managed object whose location is at, inside or around another object's location, except
a partition below its own table (``metastore.location_policy``). A dump is untrusted input written elsewhere:
a crafted one could declare partition ``p=b`` at (or inside) ``p=a``'s directory, so that a later drop of
``p=a`` on the replica recycles ``p=b``'s files, or a partition inside another table's directory. Dump
validation collects the locations of managed tables and partitions as it reads them and applies the same
rule to them as a whole. Locations are canonical (``formats.paths.canonical_uri``) source locations, compared
segment-wise; no file system is consulted (the source's paths are not this machine's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hmsrepl.formats.paths import is_below


@dataclass(frozen=True)
class _Owned:
    location: str
    table: str
    partition: str | None  # None: the table itself

    def describe(self) -> str:
        what = f"partition '{self.table}/{self.partition}'" if self.partition else f"table '{self.table}'"
        return f"{what} ('{self.location}')"


@dataclass
class DumpOwnership:
    """Managed table and partition locations seen in one dump (or one event), checked by ``conflict``.

    Memory stays bounded by the largest table, not the dump: a partition strictly below its own table's
    location ("at home", Hive's layout) can clash only with its table's other partitions, or through its table
    with another table (two locations that both hold it are nested, and the tables holding them clash first).
    So each table's at-home partitions are checked among themselves when the caller says the table is
    complete (``table_done``) and then dropped; tables and partitions placed elsewhere are kept and checked
    together at the end. The union of those checks refuses exactly what one check of everything would.
    """

    _tables: dict[str, _Owned] = field(default_factory=dict)
    _elsewhere: list[_Owned] = field(default_factory=list)  # partitions not strictly below their table
    _at_home: dict[str, list[_Owned]] = field(default_factory=dict)
    _found: str | None = None

    def table(self, name: str, location: str | None) -> None:
        if location:
            self._tables[name] = _Owned(location, name, None)

    def partition(self, table: str, name: str, location: str | None) -> None:
        if not location:
            return
        owned = _Owned(location, table, name)
        holder = self._tables.get(table)
        if holder is not None and is_below(location, holder.location, strictly=True):
            self._at_home.setdefault(table, []).append(owned)
        else:
            self._elsewhere.append(owned)

    def table_done(self, table: str) -> None:
        """Every partition of ``table`` has been seen: check its at-home ones now and forget them."""
        group = self._at_home.pop(table, None)
        if group and self._found is None:
            self._found = _first_conflict(group)

    def conflict(self) -> str | None:
        """The first location that breaks the rule, as one line naming both objects; None when all own theirs."""
        for table in list(self._at_home):
            self.table_done(table)
        if self._found is None:
            self._found = _first_conflict([*self._tables.values(), *self._elsewhere])
        return self._found


def _first_conflict(owned: list[_Owned]) -> str | None:
    """The first location in ``owned`` that breaks the rule.

    Sorted by path segments, each location's nearest holder before it is the only candidate (a holder's own
    holders were checked against it already): it may hold it only as a table holds its own partition. The sort
    key joins the segments with NUL, which sorts below every character and never appears in a checked location
    (control characters are refused), so it orders as the segment lists would without building them.
    """
    ordered = sorted(owned, key=lambda o: (o.location.replace("/", "\x00"), o.partition is not None))
    holders: list[_Owned] = []
    for item in ordered:
        while holders and not is_below(item.location, holders[-1].location):
            holders.pop()
        if holders:
            holder = holders[-1]
            own_table = (
                holder.partition is None
                and item.partition is not None
                and holder.table == item.table
                and holder.location != item.location
            )
            if not own_table:
                relation = "is" if holder.location == item.location else "lies inside"
                return (
                    f"{item.describe()} {relation} the location of {holder.describe()}: a drop of one "
                    "would delete the other's data; the source must give each object a directory of its own"
                )
        holders.append(item)
    return None
