"""Where databases, tables and partitions may live, and which directories a drop may remove.

Clients choose locations, and a drop with deleteData recycles and removes whatever lies there. The policy:

- managed databases, tables and partitions live strictly below a managed root (the warehouse, plus
  ``HMSREPL_MANAGED_ROOTS``); EXTERNAL tables and partitions below an external root (the warehouse, plus
  ``HMSREPL_EXTERNAL_ROOTS``). A root itself is nobody's location (only the default database sits at the
  warehouse, and it is never dropped);
- the change manager root, the Hadoop trash root and the metastore's own database file are never inside an
  object's location, nor an object inside them;
- a database's location neither equals, holds nor lies inside another database's, and holds no table or
  partition; a managed table's neither equals, holds nor lies inside another table's or partition's, and
  holds no database;
- at drop time a directory is removed only if it still passes these checks and no other object lives inside
  it; otherwise the drop changes metadata only and leaves the files (logged).

Checks compare canonical forms (``metastore.locations``: normalised, local symlinks resolved), never the
stored strings, which stay as the client sent them. They run before the catalog's transaction, but a single
new table's, which runs inside it on what the insert of its row read (a concurrent creation of two overlapping
objects is not excluded either way), and read other objects' locations with ``LIKE``/``IN``
queries on the stored columns, so they cost a scan, not a load of every location.
"""

from __future__ import annotations

import functools
import logging
import os
import posixpath
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Connection,
    Select,
    and_,
    bindparam,
    make_url,
    or_,
    select,
    text,
    union_all,
)

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import InvalidObjectError, MetastoreError
from hmsrepl.formats.json_text import loads
from hmsrepl.metastore.earlier_locations import EarlierLocations
from hmsrepl.metastore.list_parameter import in_list_parameter
from hmsrepl.metastore.locations import (
    BadLocationError,
    ChildResolver,
    Location,
    TreeResolver,
    canonical,
    canonical_or_none,
    key_of,
    key_range_end,
    within_any,
)
from hmsrepl.metastore.pg_occupants import databases_and_tables_around
from hmsrepl.metastore.placement import Placement
from hmsrepl.metastore.schema import dbs, partitions, tbls
from hmsrepl.metastore.sql_constant import constant

log = logging.getLogger(__name__)

MANAGED_SETTING = "HMSREPL_MANAGED_ROOTS"
EXTERNAL_SETTING = "HMSREPL_EXTERNAL_ROOTS"
PROTECTED_NAMES = {
    "HMSREPL_CMROOT": "the change manager root",
    "HMSREPL_TRASH_ROOT": "the Hadoop trash root",
    "HMSREPL_DB_URL": "the metastore's database file",
}


@dataclass(frozen=True)
class Occupant:
    """Another object whose location overlaps the one checked."""

    kind: str  # "database", "table", "partition"
    name: str
    location: Location
    holds: bool  # True when the checked location holds it (it is inside or equal)


@dataclass
class LocationPolicy:
    warehouse: str
    managed_roots: Sequence[str] = ()
    external_roots: Sequence[str] = ()
    #: (setting name, location) of directories no object may overlap: cmroot, trash, the metastore's files.
    protected: Sequence[tuple[str, str]] = ()
    _managed: list[Location] = field(init=False)
    _external: list[Location] = field(init=False)
    _protected: list[tuple[str, str, Location]] = field(init=False)

    def __post_init__(self) -> None:
        self._managed = _roots([self.warehouse, *self.managed_roots], MANAGED_SETTING)
        self._warehouse = self._managed[0]
        self._external = _roots([self.warehouse, *self.external_roots], EXTERNAL_SETTING)
        self._protected = [
            (setting, uri, loc)
            for setting, uri in self.protected
            if uri and (loc := canonical_or_none(uri)) is not None
        ]

    @classmethod
    def for_config(cls, config: MetastoreConfig) -> LocationPolicy:
        """A metastore's policy: its roots; cmroot, the trash and its own SQLite file are off limits."""
        protected = [("HMSREPL_CMROOT", config.cmroot), ("HMSREPL_TRASH_ROOT", config.trash_root)]
        url = make_url(config.db_url)
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
            protected.append(("HMSREPL_DB_URL", os.path.abspath(url.database)))
        return cls(
            config.warehouse,
            managed_roots=config.managed_roots,
            external_roots=config.external_roots,
            protected=protected,
        )

    # -- checks at entry -------------------------------------------------------------------------------
    def check_database(self, conn: Connection, name: str, uri: str | None, *, is_default: bool) -> str:
        """Refuse a database location that is not the database's own; returns its lookup key (stored beside
        the document: the location is resolved once)."""
        what = f"database '{name}'"
        loc = self._usable(what, uri)
        if is_default and loc == self._warehouse:
            return key_of(loc)
        self._check_protected(what, uri, loc)
        self._check_in_roots(what, uri, loc, self._managed, MANAGED_SETTING)
        for occupant in find_occupants(conn, loc, skip_db=name, with_partitions=False):
            if occupant.kind == "database" and occupant.location == self._warehouse and not occupant.holds:
                continue  # the default database sits at the warehouse and holds everything
            relation = "is" if occupant.location == loc else ("holds" if occupant.holds else "lies inside")
            raise InvalidObjectError(
                f"{what}: location '{uri}' {relation} the location of {occupant.kind} '{occupant.name}' "
                f"('{occupant.location}'); give it a directory of its own under the warehouse "
                f"'{self.warehouse}' (or leave the location empty)"
            )
        return key_of(loc)

    def check_table(
        self,
        conn: Connection,
        name: str,
        uri: str | None,
        *,
        managed: bool,
        table_id: int | None = None,
        around: Surroundings | None = None,
    ) -> str | None:
        """Refuse a table location that is not the table's own; returns the location's lookup key (to store
        beside it: the location is resolved once). ``around``: a read around a new table's location made
        already (``read_around_table``), used when it was made for this very location."""
        what = f"table '{name}'"
        if not uri:
            return None  # views have no location
        loc = self._usable(what, uri)
        occupants = around.occupants if around is not None and around.location == loc else None
        self._check_object(
            conn,
            what,
            uri,
            loc,
            managed=managed,
            skip_table_id=table_id,
            with_partitions=False,
            occupants=occupants,
        )
        return key_of(loc)

    def check_tables(
        self,
        conn: Connection,
        tables: Sequence[tuple[str, str | None, bool]],
        *,
        around: Surroundings | None = None,
    ) -> list[str | None]:
        """``check_table`` for new tables (qualified name, location, managed) created together, in one read of
        what lies around all their locations (a replication load's batch creates hundreds), each compared
        with those before it in ``tables`` too, as creating them one by one would. Returns their keys.
        ``around``: for one table, the read made already around its location (``check_table``)."""
        if len(tables) == 1:
            name, uri, managed = tables[0]
            return [self.check_table(conn, name, uri, managed=managed, around=around)]
        locs = [self._usable(f"table '{name}'", uri) if uri else None for name, uri, _ in tables]
        around = _occupants_of_many(
            conn,
            [loc for loc, (_, _, managed) in zip(locs, tables, strict=True) if loc is not None and managed],
        )
        keys: list[str | None] = []
        earlier = EarlierLocations()  # the batch's tables before this one: found by key, not one by one
        for (name, uri, managed), loc in zip(tables, locs, strict=True):
            if loc is None or not uri:
                keys.append(None)  # views have no location
                continue
            occupants = [
                Occupant(kind, other_name, other, other.is_within(loc))
                for kind, other_name, other in around
                if other.overlaps(loc)
            ]
            occupants += [
                Occupant("table", other.name, other.location, other.location.is_within(loc))
                for other in earlier.overlapping(loc)
            ]
            self._check_object(
                conn, f"table '{name}'", uri, loc, managed=managed, skip_table_id=None, occupants=occupants
            )
            keys.append(key_of(loc))
            earlier.add(name, loc)
        return keys

    def check_partitions(
        self,
        conn: Connection,
        table_name: str,
        uris: dict[str, str | None],
        *,
        managed: bool,
        table_location: str | None,
        table_id: int | None,
        placement: Placement | None = None,
        stored: bool = True,
    ) -> dict[str, str | None]:
        """Refuse partition locations (by partition name) that are not their own; returns each one's lookup
        key by name. The one rule for partitions added or altered: each is checked as ``check_table`` checks
        a table (a partition below its own table's directory skips the other tables, which that directory
        already excludes), and a managed partition's location neither equals, holds nor lies inside another
        partition's of the same table (a drop with deleteData would recycle the sibling's files).
        ``placement``: the table's, read with its row; when it says every stored partition is at its level
        and so is every new one, only equal keys can overlap (``metastore.placement``). ``stored`` False: the
        table has no partition stored yet (created by the caller's transaction), so the new ones are compared
        among themselves only, without a read."""
        owner = canonical_or_none(table_location)
        located: dict[str, Location] = {}
        keys: dict[str, str | None] = {}
        resolver = TreeResolver()  # the partitions share their table's directories: each resolved once
        children = self._settled_children(table_location, owner, managed)
        for name, uri in uris.items():
            loc = children.canonical(uri) if children is not None and uri else None
            if loc is None:
                loc = self._check_partition(
                    conn,
                    f"partition '{table_name}/{name}'",
                    uri,
                    managed=managed,
                    table_location=owner,
                    table_id=table_id,
                    resolver=resolver,
                )
            keys[name] = None if loc is None else key_of(loc)
            if loc is not None:
                located[name] = loc
        if managed and located:
            siblings_of = table_id if stored else None
            if placement is not None and placement.is_level((name, keys[name]) for name in located):
                self._check_level_siblings(conn, table_name, siblings_of, located, keys, uris)
            else:
                self._check_siblings(conn, table_name, siblings_of, located, uris)
        return keys

    def _check_level_siblings(
        self,
        conn: Connection,
        table_name: str,
        table_id: int | None,
        located: dict[str, Location],
        keys: dict[str, str | None],
        uris: dict[str, str | None],
    ) -> None:
        """``_check_siblings`` when every partition, stored and new, is at its level (``metastore.placement``):
        two overlap only when their lookup keys (uncut, so whole canonical locations) are equal. The new ones
        are compared by key among themselves, then with the stored ones by equality look-ups on the indexed
        key, ``_EQUAL_CHUNK`` keys a statement (a partition keeping its own location is not its sibling).
        ``table_id`` None: the new ones among themselves only."""
        named: dict[str, str] = {}  # key -> the new partition's name
        for name in located:
            key = keys[name]
            assert key is not None  # located: it has a location, hence a key
            first = named.setdefault(key, name)
            if first != name:
                self._refuse_sibling(table_name, name, uris[name], located[name], first, located[first])
        if table_id is None:
            return
        ordered = list(named)
        equal_keys = _PG_EQUAL_KEYS if conn.dialect.name == "postgresql" else _EQUAL_KEYS
        for start in range(0, len(ordered), _EQUAL_CHUNK):
            rows = conn.execute(equal_keys, {"keys": ordered[start : start + _EQUAL_CHUNK]}).all()
            for row in rows:
                name = named.get(row.location_key)
                if row.tbl_id != table_id or name is None or row.part_name == name:
                    continue
                other = canonical_or_none(row.location)
                if other is not None and located[name].overlaps(other):
                    self._refuse_sibling(table_name, name, uris[name], located[name], row.part_name, other)

    def _check_siblings(
        self,
        conn: Connection,
        table_name: str,
        table_id: int | None,
        located: dict[str, Location],
        uris: dict[str, str | None],
    ) -> None:
        """No two partitions of one table at, inside or around each other: the new ones among themselves
        (sorted by path segments, so a directory's descendants follow it before any sibling such as
        ``a-b`` after ``a``, each against the nearest holder before it), then against the stored ones by
        lookup key (equal to one of a new location's keys or its ancestors', or in its key range), a chunk
        at a time. ``table_id`` None: the new ones among themselves only."""
        ordered = sorted(
            located.items(), key=lambda item: (item[1].scheme, item[1].authority, item[1].path.split("/"))
        )
        holders: list[tuple[str, Location]] = []
        for name, loc in ordered:
            while holders and not loc.is_within(holders[-1][1]):
                holders.pop()
            if holders:
                self._refuse_sibling(table_name, name, uris[name], loc, holders[-1][0], holders[-1][1])
            holders.append((name, loc))
        if table_id is None:
            return
        items = list(located.items())
        on_pg = conn.dialect.name == "postgresql"
        for start in range(0, len(items), _SIBLING_CHUNK):
            chunk = items[start : start + _SIBLING_CHUNK]
            above: set[str] = set()
            for _, loc in chunk:
                _add_keys_up(loc, above)
            froms = [key_of(loc) for _, loc in chunk]
            tos = [key_range_end(key) for key in froms]
            if on_pg:
                params: dict[str, object] = {"above": sorted(above), "froms": froms, "tos": tos}
            else:  # one statement shape: the unused ranges are empty
                unused = [""] * (_SIBLING_CHUNK - len(chunk))
                params = {"above": sorted(above)}
                for number, (low, high) in enumerate(zip(froms + unused, tos + unused, strict=True)):
                    params[f"from{number}"], params[f"to{number}"] = low, high
            rows = conn.execute(_PG_SIBLINGS if on_pg else _SIBLINGS, params).all()
            for row in rows:
                other = canonical_or_none(row.location) if row.tbl_id == table_id else None
                if other is None:
                    continue
                for name, loc in chunk:
                    if name != row.part_name and loc.overlaps(other):
                        self._refuse_sibling(table_name, name, uris[name], loc, row.part_name, other)

    @staticmethod
    def _refuse_sibling(
        table_name: str, name: str, uri: str | None, loc: Location, other_name: str, other: Location
    ) -> None:
        relation = "is" if other == loc else ("holds" if other.is_within(loc) else "lies inside")
        raise InvalidObjectError(
            f"partition '{table_name}/{name}': managed location '{uri}' {relation} the location of partition "
            f"'{table_name}/{other_name}' ('{other}'); a drop would delete its data: give each partition a "
            "directory of its own (or leave the location empty for the default one)"
        )

    def _settled_children(
        self, table_location: str | None, owner: Location | None, managed: bool
    ) -> ChildResolver | None:
        """The direct children of a table's directory, when that directory settles for all of them what
        ``_check_partition`` checks of a partition below it: it lies in a root of the partition's kind, holds
        no such root strictly inside it and overlaps no protected path, so each child is in the roots, is no
        root and overlaps nothing protected. A table of 100,000 partitions in Hive's layout then pays these
        checks once, and one ``lstat`` a partition (``ChildResolver``). None: every partition is checked."""
        if owner is None or not table_location:
            return None
        roots = self._managed if managed else self._external
        if within_any(owner, roots) is None or any(root != owner and root.is_within(owner) for root in roots):
            return None
        if any(owner.overlaps(protected) for _, _, protected in self._protected):
            return None
        return ChildResolver.of(table_location, owner)

    def _check_partition(
        self,
        conn: Connection,
        what: str,
        uri: str | None,
        *,
        managed: bool,
        table_location: Location | None,
        table_id: int | None,
        resolver: TreeResolver | None = None,
    ) -> Location | None:
        """As ``check_table`` for one partition of a table at ``table_location`` (canonical, resolved once
        for a batch of partitions); returns its canonical location (``resolver``: shared by the batch)."""
        if not uri:
            return None
        loc = self._usable(what, uri, resolver)
        if table_location is not None and loc.is_within(table_location) and loc != table_location:
            # Below its own table, which was checked: only the roots and protected paths can still differ
            # (a table root may itself sit above them only if it was created before this policy).
            self._check_protected(what, uri, loc)
            self._check_in_roots(
                what, uri, loc, self._managed if managed else self._external, _setting(managed)
            )
        else:
            self._check_object(conn, what, uri, loc, managed=managed, skip_table_id=table_id)
        return loc

    def _check_object(
        self,
        conn: Connection,
        what: str,
        uri: str,
        loc: Location,
        *,
        managed: bool,
        skip_table_id: int | None,
        with_partitions: bool = True,
        occupants: list[Occupant] | None = None,
    ) -> None:
        """``occupants``: those around ``loc`` read already (``check_tables``), else read here."""
        roots = self._managed if managed else self._external
        self._check_protected(what, uri, loc)
        self._check_in_roots(what, uri, loc, roots, _setting(managed))
        if not managed:
            return  # external data may be shared; it is never deleted by a drop
        if occupants is None:
            occupants = find_occupants(
                conn, loc, skip_table_id=skip_table_id, with_partitions=with_partitions
            )
        for occupant in occupants:
            if occupant.kind == "database" and not occupant.holds:
                continue  # a table below a database's directory is the normal case
            if occupant.kind == "table" and f"table '{occupant.name}'" == what:
                continue  # the same name: the catalog answers "already exists"
            relation = "is" if occupant.location == loc else ("holds" if occupant.holds else "lies inside")
            raise InvalidObjectError(
                f"{what}: managed location '{uri}' {relation} the location of {occupant.kind} "
                f"'{occupant.name}' ('{occupant.location}'); a drop would delete its data: choose a directory "
                "of its own, or make the table EXTERNAL"
            )

    # -- checks at drop time ---------------------------------------------------------------------------
    def removable(
        self,
        conn: Connection,
        what: str,
        uri: str | None,
        *,
        skip_db: str | None = None,
        skip_table_id: int | None = None,
        skip_partitions: tuple[int, Collection[str]] | None = None,
        owner_location: str | None = None,
    ) -> bool:
        """Whether a drop may recycle and remove the directory ``uri`` (else it leaves the files, logged)."""
        if not uri:
            return False
        reason = self.removal_refusal(
            conn,
            uri,
            skip_db=skip_db,
            skip_table_id=skip_table_id,
            skip_partitions=skip_partitions,
            owner_location=owner_location,
        )
        if reason:
            log.warning("%s: its files at '%s' are left in place: %s", what, uri, reason)
        return reason is None

    def removal_refusal(
        self,
        conn: Connection,
        uri: str,
        *,
        skip_db: str | None = None,
        skip_table_id: int | None = None,
        skip_partitions: tuple[int, Collection[str]] | None = None,
        owner_location: str | None = None,
    ) -> str | None:
        """Why the directory ``uri`` may not be emptied or removed, or ``None`` when it may.

        ``owner_location`` (a partition's table directory) spares the look-up of other objects when ``uri``
        lies strictly inside it: creation keeps other tables out of a managed table's directory, and a
        drop of 1,000 partitions must not scan the catalog 1,000 times.
        """
        try:
            loc = canonical(uri)
        except BadLocationError as exc:
            return f"the location {exc}"
        if within_any(loc, self._managed) is None or loc in self._managed:
            return "it is not strictly below a managed root"
        for setting, _, protected in self._protected:
            if loc.overlaps(protected):
                return f"it overlaps {setting} '{protected}'"
        owner = canonical_or_none(owner_location)
        if owner is not None and loc != owner and loc.is_within(owner):
            return None
        for occupant in find_occupants(
            conn,
            loc,
            skip_db=skip_db,
            skip_table_id=skip_table_id,
            skip_partitions=skip_partitions,
            above=False,
        ):
            if occupant.holds:
                return f"it holds {occupant.kind} '{occupant.name}'"
        return None

    # -- helpers ---------------------------------------------------------------------------------------
    @staticmethod
    def _usable(what: str, uri: str | None, resolver: TreeResolver | None = None) -> Location:
        try:
            return resolver.canonical(uri or "") if resolver is not None else canonical(uri or "")
        except BadLocationError as exc:
            raise InvalidObjectError(f"{what}: location {uri!r} {exc}") from None

    def _check_in_roots(
        self, what: str, uri: str, loc: Location, roots: list[Location], setting: str
    ) -> None:
        kind = "managed" if setting == MANAGED_SETTING else "EXTERNAL"
        # An external root may be one table's directory (external data is never deleted); the warehouse
        # and managed roots are nobody's.
        if loc == self._warehouse or (loc in roots and setting == MANAGED_SETTING):
            raise InvalidObjectError(
                f"{what}: {kind} location '{uri}' is a root itself; give the object a directory below it"
            )
        if within_any(loc, roots) is None:
            raise InvalidObjectError(
                f"{what}: {kind} location '{uri}' is outside the {kind.lower()} roots "
                f"{[str(root) for root in roots]}; put it below one of them or add its root to {setting} "
                "(a JSON list)"
            )

    def _check_protected(self, what: str, uri: str, loc: Location) -> None:
        for setting, configured, protected in self._protected:
            if loc.overlaps(protected):
                relation = "is" if loc == protected else ("holds" if protected.is_within(loc) else "lies in")
                raise InvalidObjectError(
                    f"{what}: location '{uri}' {relation} {PROTECTED_NAMES.get(setting, 'the path')} "
                    f"'{configured}' ({setting}), which no object may use; choose a directory under the warehouse"
                )


def _setting(managed: bool) -> str:
    return MANAGED_SETTING if managed else EXTERNAL_SETTING


def _roots(uris: Iterable[str], setting: str) -> list[Location]:
    out = []
    for number, uri in enumerate(uris):
        name = "HMSREPL_WAREHOUSE" if number == 0 else setting
        try:
            out.append(canonical(uri))
        except BadLocationError as exc:
            raise MetastoreError(f"{name}: root {uri!r} {exc}") from None
    return out


def _overlapping(key: ColumnElement[str]) -> ColumnElement[bool]:
    """Stored locations inside a path (a range of lookup keys) or equal to one of its ancestors (``IN``):
    both answered from the key's index."""
    return or_(
        and_(key >= bindparam("inside_from"), key < bindparam("inside_to")),
        in_list_parameter(key, "above"),
    )


def _databases_where(*conditions: ColumnElement[bool]) -> Select[Any]:
    """The databases meeting any of ``conditions`` (on their location keys; their locations are in the
    document, read with it): a warehouse holds hundreds of databases, and a check reads only those near
    the location checked."""
    return select(
        constant("database").label("kind"), dbs.c.name, dbs.c.doc.label("stored"), dbs.c.name.label("db_name")
    ).where(or_(*conditions))


def _tables_by_location(query: Select[Any]) -> Select[Any]:
    """``query`` (tables joined to their databases, filtered by location key) with the tables read through
    their location key on MariaDB: its optimizer joined each database to all of its tables through their
    (db_id, tbl_name) key, then filtered them by location, so every check read a row per table of the
    database (creating N tables one at a time read N^2/2 rows; with 1,000 tables a check took twice as long).
    The other planners take the key range themselves."""
    for dialect in ("mysql", "mariadb"):
        query = query.with_hint(tbls, "IGNORE INDEX FOR JOIN (uq_tbls_db_id_tbl_name)", dialect_name=dialect)
    return query


# Built once, with bound parameters: they run for every managed table created (SQLAlchemy spends ~40 us
# building a statement and more compiling one whose shape is new).
# The overlapping databases and tables in one statement: every table or database created asks, and on a
# networked database the round trip is most of the cost. ``own_db``: a database read whatever its location
# (a new table's own, ``read_around_table``; "" for none, names are never empty).
_DATABASES_AND_TABLES = union_all(
    _databases_where(
        _overlapping(dbs.c.location_key),
        _overlapping(dbs.c.managed_location_key),
        dbs.c.name == bindparam("own_db"),
    ),
    _tables_by_location(
        select(constant("table"), tbls.c.tbl_name, tbls.c.location, dbs.c.name)
        .join(dbs, dbs.c.db_id == tbls.c.db_id)
        .where(
            _overlapping(tbls.c.location_key),
            tbls.c.tbl_id != bindparam("skip_tbl"),
            dbs.c.name != bindparam("skip_db"),
        )
    ),
)
_FLAG = "flag"  # the kind of ``around_table_query``'s extra row
_PARTITIONS = (
    select(partitions.c.tbl_id, partitions.c.part_name, partitions.c.location, tbls.c.tbl_name, dbs.c.name)
    .join(tbls, tbls.c.tbl_id == partitions.c.tbl_id)
    .join(dbs, dbs.c.db_id == tbls.c.db_id)
    .where(
        _overlapping(partitions.c.location_key),
        tbls.c.tbl_id != bindparam("skip_tbl"),
        dbs.c.name != bindparam("skip_db"),
    )
)


def _add_keys_up(loc: Location, keys: set[str]) -> None:
    """Add the lookup keys of ``loc`` and of its ancestors to ``keys``, stopping at the first one already
    there (its ancestors are then there too): sibling partitions share theirs, so a batch computes each once."""
    path = loc.path
    while True:
        key = key_of(Location(loc.scheme, loc.authority, path))
        if key in keys:
            return
        keys.add(key)
        if path == "/":
            return
        path = posixpath.dirname(path)


#: New partitions compared with the stored ones per query: one statement shape (unused ranges are empty), so
#: a batch of 1,000 costs 16 indexed look-ups rather than 1,000.
_SIBLING_CHUNK = 64
# Ranges of lookup keys only (the table is compared in Python): with ``tbl_id`` in the condition, planners
# read every partition of the table through its (tbl_id, part_name) index instead of probing 64 key ranges.
_SIBLINGS = select(partitions.c.tbl_id, partitions.c.part_name, partitions.c.location).where(
    or_(
        in_list_parameter(partitions.c.location_key, "above"),
        *(
            and_(
                partitions.c.location_key >= bindparam(f"from{number}"),
                partitions.c.location_key < bindparam(f"to{number}"),
            )
            for number in range(_SIBLING_CHUNK)
        ),
    ),
)

# The same on PostgreSQL, an index probe per key and per range by construction (``_PG_EQUAL_KEYS`` tells why):
# planned without statistics, the ``OR`` of 64 ranges read a filling table in full for every 64 new partitions.
_PG_SIBLINGS = text(
    """
SELECT p.tbl_id, p.part_name, p.location
FROM unnest(CAST(:above AS VARCHAR[])) AS k(key)
CROSS JOIN LATERAL (
    SELECT tbl_id, part_name, location FROM partitions WHERE partitions.location_key = k.key OFFSET 0
) AS p
UNION ALL
SELECT p.tbl_id, p.part_name, p.location
FROM unnest(CAST(:froms AS VARCHAR[]), CAST(:tos AS VARCHAR[])) AS r(low, high)
CROSS JOIN LATERAL (
    SELECT tbl_id, part_name, location FROM partitions
    WHERE partitions.location_key >= r.low AND partitions.location_key < r.high OFFSET 0
) AS p
"""
)

#: New partitions' keys looked up per statement when all are at their levels (``_check_level_siblings``).
_EQUAL_CHUNK = 500
# Equal keys only (the table is compared in Python, as in ``_SIBLINGS``): one index probe per key. MariaDB is
# told to use the key's index: in a transaction filling the table its statistics do not count the new rows,
# and the ``IN`` of 500 keys was answered by a full scan, each page reading every earlier one.
_KEY_INDEX_HINT = "FORCE INDEX (ix_partitions_location_key)"
_EQUAL_KEYS = (
    select(partitions.c.tbl_id, partitions.c.part_name, partitions.c.location, partitions.c.location_key)
    .where(in_list_parameter(partitions.c.location_key, "keys"))
    .with_hint(partitions, _KEY_INDEX_HINT, dialect_name="mysql")
    .with_hint(partitions, _KEY_INDEX_HINT, dialect_name="mariadb")
)
# The same on PostgreSQL, a probe per key by construction. A bootstrap fills ``partitions`` in its own
# transaction, where no statistics describe the new rows: planned from the table's pages alone, ``= ANY`` of
# 500 keys looked like a tenth of the table and was read by a sequential scan, each page of a 100,000-partition
# table scanning all the earlier ones (19 ms a statement at the end, 3.7 s of the server's 9.9 s of CPU in
# that load). The fenced (``OFFSET 0``) lateral subquery is planned as one equality look-up, which the
# planner gives the index at any size; a statement of 500 probes then takes about 2 ms.
_PG_EQUAL_KEYS = text(
    """
SELECT p.tbl_id, p.part_name, p.location, p.location_key
FROM unnest(CAST(:keys AS VARCHAR[])) AS k(key)
CROSS JOIN LATERAL (
    SELECT tbl_id, part_name, location, location_key FROM partitions WHERE partitions.location_key = k.key OFFSET 0
) AS p
"""
)


#: New tables' locations compared with the stored ones per statement (``_occupants_of_many``): one shape of
#: statement, unused ranges empty.
_TABLES_CHUNK = 64
#: The same on PostgreSQL, where the ranges are arrays (``pg_occupants``): one statement for a load's batch.
_PG_TABLES_CHUNK = 1000


def _around_chunk(key: ColumnElement[str]) -> ColumnElement[bool]:
    """Stored keys inside any of a chunk's locations (a key range each) or at one of their ancestors
    (``above``): each answered from the key's index."""
    return or_(
        in_list_parameter(key, "above"),
        *(
            and_(key >= bindparam(f"from{number}"), key < bindparam(f"to{number}"))
            for number in range(_TABLES_CHUNK)
        ),
    )


# The databases and the tables inside any of the chunk's locations or at one of their ancestors.
_DATABASES_AND_TABLES_AROUND = union_all(
    _databases_where(_around_chunk(dbs.c.location_key), _around_chunk(dbs.c.managed_location_key)),
    _tables_by_location(
        select(constant("table"), tbls.c.tbl_name, tbls.c.location, dbs.c.name)
        .join(dbs, dbs.c.db_id == tbls.c.db_id)
        .where(_around_chunk(tbls.c.location_key))
    ),
)


def _around_params(ranges: Sequence[tuple[str, str]], above: Iterable[str]) -> dict[str, object]:
    """``_DATABASES_AND_TABLES_AROUND``'s parameters for up to ``_TABLES_CHUNK`` key ranges (the unused ones
    empty) and the ancestors' keys ``above``."""
    params: dict[str, object] = {"above": sorted(above)}
    for number in range(_TABLES_CHUNK):
        params[f"from{number}"], params[f"to{number}"] = ranges[number] if number < len(ranges) else ("", "")
    return params


def _occupants_of_many(conn: Connection, locs: Sequence[Location]) -> list[tuple[str, str, Location]]:
    """(kind, name, location) of the databases and tables that may overlap any of ``locs``: what
    ``find_occupants`` reads for one location (partitions left out, as for a new table), for many in a
    statement per ``_TABLES_CHUNK`` (on PostgreSQL per ``_PG_TABLES_CHUNK``, ``pg_occupants``). The caller
    keeps, for each location, those that overlap it."""
    if not locs:
        return []
    on_postgres = conn.dialect.name == "postgresql"
    size = _PG_TABLES_CHUNK if on_postgres else _TABLES_CHUNK
    found: dict[tuple[str, str, Location], None] = {}  # ordered, each object's location once
    for start in range(0, len(locs), size):
        chunk = locs[start : start + size]
        above: set[str] = set()
        ranges = []
        for loc in chunk:
            inside = key_of(loc)
            above.update(key_of(ancestor) for ancestor in loc.ancestors())
            ranges.append((inside, key_range_end(inside)))
        rows = (
            databases_and_tables_around(conn, ranges, sorted(above))
            if on_postgres
            else conn.execute(_DATABASES_AND_TABLES_AROUND, _around_params(ranges, above))
        )
        for row in rows:
            if row.kind == "database":  # both of its locations, as ``_overlapping_rows`` compares them
                for stored in _database_locations(row.stored):
                    _keep(found, "database", row.name, stored)
            else:
                _keep(found, "table", f"{row.db_name}.{row.name}", row.stored)
    return list(found)


def _keep(found: dict[tuple[str, str, Location], None], kind: str, name: str, stored: str | None) -> None:
    """Add the object's stored location to ``found`` (once however many ranges read it), if it has one."""
    other = canonical_or_none(stored)
    if other is not None:
        found[(kind, name, other)] = None


def find_occupants(
    conn: Connection,
    loc: Location,
    *,
    skip_db: str | None = None,
    skip_table_id: int | None = None,
    skip_partitions: tuple[int, Collection[str]] | None = None,
    with_partitions: bool = True,
    above: bool = True,
) -> list[Occupant]:
    """Databases, tables and partitions whose location overlaps ``loc`` (inside or equal; above it too when
    ``above``).

    Candidates come from the indexed lookup keys stored beside each location (``locations.key_of``): those
    inside are one key range, those above are equal to one of the ancestors' keys. Each is then compared in
    canonical form. Creating a table or database leaves the partitions out
    (``with_partitions=False``): a partition inside its own table's directory overlaps another object only if
    its table does, and one outside it was compared with everything when it was added.
    """
    params = _find_params(loc)
    if not above:
        params["above"] = []
    if skip_table_id is not None:
        params["skip_tbl"] = skip_table_id
    if skip_db is not None:
        params["skip_db"] = skip_db
    out = _overlapping_rows(conn.execute(_DATABASES_AND_TABLES, params).all(), loc, skip_db)
    if not with_partitions:
        return out
    skip_tbl, skip_names = skip_partitions or (None, ())
    for row in conn.execute(_PARTITIONS, params):
        if not (row.tbl_id == skip_tbl and row.part_name in skip_names):
            _consider(out, loc, "partition", f"{row.name}.{row.tbl_name}/{row.part_name}", row.location)
    return out


def _find_params(loc: Location) -> dict[str, object]:
    """The bounds of ``find_occupants``' statements for ``loc``, nothing skipped (ids are positive, names
    never empty)."""
    inside = key_of(loc)
    return {
        "inside_from": inside,
        "inside_to": key_range_end(inside),
        "above": sorted({key_of(ancestor) for ancestor in loc.ancestors()}),
        "skip_tbl": -1,
        "skip_db": "",
        "own_db": "",
    }


def _overlapping_rows(rows: Iterable[Any], loc: Location, skip_db: str | None) -> list[Occupant]:
    """The databases and tables among ``_DATABASES_AND_TABLES``' rows whose location overlaps ``loc``."""
    out: list[Occupant] = []
    for row in rows:
        if row.kind == "database" and row.name != skip_db:
            for stored in _database_locations(row.stored):
                _consider(out, loc, "database", row.name, stored)
    for row in rows:
        if row.kind == "table":
            _consider(out, loc, "table", f"{row.db_name}.{row.name}", row.stored)
    return out


@functools.lru_cache(maxsize=4_096)
def _database_locations(doc: str) -> tuple[str | None, str | None]:
    """The locations in a database's stored document: its own and Hive 4's managed one. Remembered per
    document text: every location check reads the documents of the databases around it (and a create its
    own database's), and few of them ever change."""
    stored = loads(doc)  # stored by the catalog
    return stored.get("location_uri"), stored.get("managed_location_uri")


def _consider(out: list[Occupant], loc: Location, kind: str, name: str, stored: str | None) -> None:
    other = canonical_or_none(stored)
    if other is not None and other.overlaps(loc):
        out.append(Occupant(kind, name, other, other.is_within(loc)))


@dataclass(frozen=True)
class Surroundings:
    """What one read around a new table's location found (``read_around_table``)."""

    location: Location
    occupants: list[Occupant]
    database_docs: dict[str, str]  # stored documents by name: the new table's database and those around
    flagged: bool  # whether the caller's condition held


def around_table_query(flag: ColumnElement[bool]) -> CompoundSelect:
    """The statement of ``read_around_table``: ``find_occupants``' read for a new table, plus one row when
    ``flag`` holds (a create asks whether file intents are pending in it: no statement of its own)."""
    flag_row = select(constant(_FLAG), constant(""), constant(""), constant("")).where(flag)
    return union_all(*_DATABASES_AND_TABLES.selects, flag_row)


def read_around_table(conn: Connection, loc: Location, query: CompoundSelect, db_name: str) -> Surroundings:
    """The objects around a new managed table's location ``loc``, the document of its database ``db_name``
    and the flag of ``query`` (``around_table_query``), in one statement: a single create reads its
    database and checks its location in one round trip (``LocationPolicy.check_table``'s ``around``)."""
    return surroundings_of(conn.execute(query, around_params(loc, db_name)).all(), loc)


def around_params(loc: Location, db_name: str) -> dict[str, object]:
    """The parameters of ``around_table_query``'s statement for a new table at ``loc`` in ``db_name``."""
    return {**_find_params(loc), "own_db": db_name}


class AroundRow(NamedTuple):
    """A row of ``around_table_query``, as a statement that carries it as JSON hands it back."""

    kind: str
    name: str
    stored: str | None
    db_name: str


def surroundings_of(rows: Sequence[Any], loc: Location) -> Surroundings:
    """What the rows of ``around_table_query`` read around ``loc`` say (``AroundRow`` or the statement's)."""
    docs = {row.name: row.stored for row in rows if row.kind == "database"}
    flagged = any(row.kind == _FLAG for row in rows)
    return Surroundings(loc, _overlapping_rows(rows, loc, None), docs, flagged)
