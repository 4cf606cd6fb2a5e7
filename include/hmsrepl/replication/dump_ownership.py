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
    """Managed table and partition locations seen in one dump (or one event), checked by ``conflict``."""

    _owned: list[_Owned] = field(default_factory=list)

    def table(self, name: str, location: str | None) -> None:
        if location:
            self._owned.append(_Owned(location, name, None))

    def partition(self, table: str, name: str, location: str | None) -> None:
        if location:
            self._owned.append(_Owned(location, table, name))

    def conflict(self) -> str | None:
        """The first location that breaks the rule, as one line naming both objects; None when all own theirs.

        Sorted by path segments, each location's nearest holder before it is the only candidate (a holder's
        own holders were checked against it already): it may hold it only as a table holds its own partition.
        """
        ordered = sorted(self._owned, key=lambda o: (o.location.split("/"), o.partition is not None))
        holders: list[_Owned] = []
        for owned in ordered:
            while holders and not is_below(owned.location, holders[-1].location):
                holders.pop()
            if holders:
                holder = holders[-1]
                own_table = (
                    holder.partition is None
                    and owned.partition is not None
                    and holder.table == owned.table
                    and holder.location != owned.location
                )
                if not own_table:
                    relation = "is" if holder.location == owned.location else "lies inside"
                    return (
                        f"{owned.describe()} {relation} the location of {holder.describe()}: a drop of one "
                        "would delete the other's data; the source must give each object a directory of its own"
                    )
            holders.append(owned)
        return None
