"""What a replica's directories may hold, and removing what loads left behind.

A load publishes every data change as a new version directory and switches the object's location to it in
the batch's transaction (``replication.target``). What no metadata names is then not data: an old version
after its batch committed, a version a failed or killed batch made, staged copies, directories of dropped
objects. This module tells the two apart and removes the second kind:

- *retirement*: after a batch commits (and a grace period for readers that took the old metadata), the
  directories it stopped naming are removed, their replaced files first recycled into the replica's cmroot
  (a replica can itself be a source: its earlier events name those files);
- *sweep*: everything under a directory (the replica database's, for ``hmsrepl repl cleanup`` and after an
  interrupted load) that no table or partition names.

What "named" means: an unpartitioned table's or a partition's location holds data, all of it below (files
and subdirectories such as ACID deltas), except staged copies; a partitioned table's location is only a
container: below it only its partitions' locations are kept. Both run under the replica database's row lock,
which every load batch holds while it writes, so a sweep never removes a directory a concurrent batch is
filling.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import or_, select

from hmsrepl.exceptions import NoSuchDatabaseError, StorageError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import REPLICA_OF
from hmsrepl.metastore.schema import dbs, partitions, tbls
from hmsrepl.replication.failures import fault_point
from hmsrepl.replication.filecopy import is_staging_name, logical_location, standby_location
from hmsrepl.replication.locations import EXTERNAL_ROOT, legacy_external_root
from hmsrepl.storage.base import FileStatus, join_uri, path_key, relative_to
from hmsrepl.storage.rooted import RootedFileSystem

log = logging.getLogger(__name__)

# Default seconds between a batch's commit and the removal of the directories it stopped naming: a reader
# that took the metadata just before the commit still lists and reads the old files meanwhile.
DEFAULT_RETIRE_GRACE_SECONDS = 60.0
RETIRE_GRACE_ENV = "HMSREPL_REPL_RETIRE_GRACE_SECONDS"


# Retirements whose grace period has not run out when a load ends wait here, below the replica database's
# directory, one JSON ticket per batch: the next load (or ``repl cleanup``) carries them out once due, so no
# load sleeps out the grace period, and sweeps and ``repl verify`` leave ticketed directories alone.
RETIRING_DIR = ".hmsrepl-retiring"


def retire_grace_seconds() -> float:
    value = os.environ.get(RETIRE_GRACE_ENV)
    return float(value) if value else DEFAULT_RETIRE_GRACE_SECONDS


@dataclass(frozen=True)
class Retirement:
    """A directory a committed batch no longer names; ``carried`` files live on in a newer version."""

    directory: str
    carried: frozenset[str] = frozenset()  # relative paths whose content a newer version holds
    recycle: bool = True  # False: nothing there is data (e.g. a copier's staged copies): delete only
    standby: str = ""  # park the directory here (its object's standby, ``replication.standby``), not removed
    whole: bool = False  # ``carried`` is every data file the directory holds (nothing to recycle)


@dataclass
class NamedLocations:
    """The locations metadata names at or below a directory (and the data locations above it)."""

    data: set[str] = field(default_factory=set)  # whole subtree is data
    containers: set[str] = field(default_factory=set)  # partitioned tables: only named children count

    def _ancestors(self, uri: str) -> Iterable[str]:
        path = uri.rstrip("/")
        while "/" in path:
            yield path
            path = path.rsplit("/", 1)[0]

    def keeps_file(self, uri: str) -> bool:
        name = uri.rstrip("/").rsplit("/", 1)[-1]
        if is_staging_name(name):
            return False
        return any(a in self.data for a in self._ancestors(uri.rsplit("/", 1)[0]))

    def keeps_dir(self, uri: str) -> bool:
        path = uri.rstrip("/")
        if any(a in self.data for a in self._ancestors(path)):
            return True
        prefix = path + "/"
        return path in self.containers or any(
            loc.startswith(prefix) for loc in (*self.data, *self.containers)
        )


def named_locations(store: Metastore, root: str) -> NamedLocations:
    """Every table and partition location at or below ``root``, plus data locations above it."""
    root = root.rstrip("/")
    ancestors = []
    path = root
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        if path:
            ancestors.append(path)
    named = NamedLocations()
    below = [root, *ancestors]
    with store.events.reader() as conn:
        for column, doc in ((tbls.c.location, tbls.c.doc), (partitions.c.location, None)):
            query = select(column, doc) if doc is not None else select(column)
            query = query.where(or_(column.in_(below), column.startswith(root + "/", autoescape=True)))
            for row in conn.execute(query):
                location = (row[0] or "").rstrip("/")
                if not location:
                    continue
                partitioned = doc is not None and bool(json.loads(row[1]).get("partition_keys"))
                if location in ancestors and partitioned:
                    continue  # a container above root names nothing below it by itself
                (named.containers if partitioned else named.data).add(location)
    return named


@dataclass
class Leftovers:
    files: list[FileStatus] = field(default_factory=list)  # unnamed files (staged copies included)
    directories: list[str] = field(default_factory=list)  # unnamed directories, deepest first

    def describe(self, root: str) -> list[str]:
        """The topmost leftover entries, relative to ``root`` (directories end with '/')."""
        dirs = sorted(self.directories)
        tops: list[str] = []
        for d in dirs:
            if not any(d.startswith(t + "/") for t in tops):
                tops.append(d)
        out = [relative_to(d, root) + "/" for d in tops if d != root.rstrip("/")]
        out += [
            relative_to(f.uri, root) for f in self.files if not any(f.uri.startswith(t + "/") for t in tops)
        ]
        return sorted(out)


def find_leftovers(
    store: Metastore,
    root: str,
    *,
    keep_root: bool = True,
    spare: str | None = None,
    tickets: str | None = None,
) -> Leftovers:
    """Files and directories under ``root`` that no metadata names (``root`` too unless ``keep_root``).

    ``spare``: a directory below ``root`` left out (a load's running marks, removed by the load last).
    ``tickets``: the retirement tickets whose directories are left out (default: ``root``'s own; a sweep of
    a replica's external root passes its database's).
    """
    tickets = tickets or join_uri(root, RETIRING_DIR)
    fs = RootedFileSystem([root, tickets], purpose=f"sweep of '{root}'")
    named = named_locations(store, root)
    if spare:
        named.data.add(spare.rstrip("/"))
    # An object's parked standby (``replication.standby``) is kept while metadata names the object.
    named.data.update([standby_location(logical_location(location)) for location in named.data])
    if fs.exists(tickets):  # awaiting their grace period: retired by a later load, not swept
        named.data.add(tickets.rstrip("/"))
        named.data.update(r.directory.rstrip("/") for _, _, batch in read_tickets(fs, tickets) for r in batch)
    owed = store.catalog.intents.owed_copies()  # staged copies whose publication a committed load owes
    found = Leftovers()
    found.files = [
        status
        for status in fs.list_files(root)
        if not named.keeps_file(status.uri) and path_key(status.uri) not in owed
    ]
    found.directories = [  # object stores have no directories of their own: none listed there
        uri for uri in fs.directories(root, deepest_first=True) if not named.keeps_dir(uri)
    ]
    uri_root = root.rstrip("/")
    if not keep_root and fs.is_directory(root) and not named.keeps_dir(uri_root):
        found.directories.append(uri_root)
    return found


def remove_leftovers(
    store: Metastore,
    root: str,
    *,
    recycle_except: frozenset[str] | None = None,
    keep_root: bool = True,
    spare: str | None = None,
    tickets: str | None = None,
) -> int:
    """Remove what no metadata names under ``root``; returns how many files were removed.

    ``recycle_except``: recycle the removed data files into the store's cmroot first, except those at these
    relative paths (their content lives on in a newer version); None removes without recycling.
    """
    found = find_leftovers(store, root, keep_root=keep_root, spare=spare, tickets=tickets)
    fs = RootedFileSystem([root], purpose=f"sweep of '{root}'")
    if recycle_except is not None:
        replaced = [
            s
            for s in found.files
            if not is_staging_name(s.uri.rsplit("/", 1)[-1])
            and relative_to(s.uri, root) not in recycle_except
        ]
        if replaced:
            store.cm.recycle(describe_files(root, store.cm, replaced))
            fault_point()
    for status in found.files:
        fs.delete(status.uri)
        fault_point()
    for directory in found.directories:  # deepest first: each is empty by now unless a named one is inside
        fs.remove_empty_directory(directory)
    return len(found.files)


def locked_cleanup(
    store: Metastore,
    db_name: str,
    roots: Iterable[tuple[str, frozenset[str] | None]],
    *,
    keep_root: bool = False,
    spare: str | None = None,
    sweep: bool = False,
) -> int:
    """``remove_leftovers`` for each (root, recycle_except) under the database's row lock (see module doc).

    ``sweep``: the roots are the replica's own directories, swept whole: directories awaiting retirement in
    the database's tickets are left alone in each of them (a retirement carries out its own ticket).
    """
    removed = 0
    try:
        with store.events.transaction():
            db = store.catalog.lock_database(db_name)
            db_root = (db.location_uri or store.catalog.default_db_location(db_name)).rstrip("/")
            # Empty parents go up to the replica's own directories (the shared tree of older replicas,
            # whose directories a move retires, up to its top).
            own_roots = [
                db_root,
                db.parameters.get(EXTERNAL_ROOT, "").rstrip("/"),
                legacy_external_root(store.config.warehouse),
            ]
            for root, recycle_except in roots:
                if store.cm.files.exists(root):
                    removed += remove_leftovers(
                        store,
                        root,
                        recycle_except=recycle_except,
                        keep_root=keep_root,
                        spare=spare,
                        tickets=tickets_dir(store, db_name) if sweep else None,
                    )
                stop = next((r for r in own_roots if r and root.rstrip("/").startswith(r + "/")), None)
                if not keep_root and stop:
                    _prune_empty_parents(store, root, stop)
    except NoSuchDatabaseError:
        pass  # dropped meanwhile: its directory went with it
    return removed


def _prune_empty_parents(store: Metastore, root: str, stop: str) -> None:
    """Remove empty directories above a retired one that no metadata names, up to ``stop`` (local only)."""
    if not root.rstrip("/").startswith(stop + "/"):
        return
    fs = RootedFileSystem([stop], purpose=f"removal of empty directories below '{stop}'")
    path = root.rstrip("/").rsplit("/", 1)[0]
    while path.startswith(stop + "/"):  # object stores have no directories: the first test stops it
        if not fs.is_empty_directory(path) or named_locations(store, path).keeps_dir(path):
            return
        fs.remove_empty_directory(path)
        path = path.rsplit("/", 1)[0]


def read_tickets(fs: RootedFileSystem, directory: str) -> list[tuple[str, float, list[Retirement]]]:
    """(ticket URI, due epoch seconds, retirements) of each deferred batch, oldest first."""
    out = []
    for status in sorted(fs.list_files(directory), key=lambda s: s.uri):
        try:
            with fs.open_read(status.uri) as stream:
                doc = json.loads(stream.read())
            batch = [
                Retirement(
                    r["directory"],
                    frozenset(r["carried"]),
                    bool(r["recycle"]),
                    r.get("standby", ""),
                    bool(r.get("whole")),
                )
                for r in doc["retirements"]
            ]
            out.append((status.uri, float(doc["due"]), batch))
        except (FileNotFoundError, StorageError):  # carried out by another process since the listing?
            if fs.exists(status.uri):
                raise
            continue
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable retirement ticket '%s'", status.uri)
    return out


def _dumps(doc: dict[str, object]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Retired:
    """What carrying out due retirement tickets did: version directories retired and their files removed."""

    directories: int = 0
    files: int = 0

    def __add__(self, other: Retired) -> Retired:
        return Retired(self.directories + other.directories, self.files + other.files)


@dataclass(frozen=True)
class CleanupResult:
    """What ``repl cleanup`` did: due retirements, then the sweep of what no metadata names."""

    retired: Retired
    swept_files: int

    def describe(self, db_name: str) -> str:
        return (
            f"retired {self.retired.directories} replaced version directories ({self.retired.files} files); "
            f"removed {self.swept_files} other files no metadata of {db_name} names"
        )


def replica_root(store: Metastore, db_name: str) -> str:
    """The replica database's directory: its recorded location, else where a load would create it.

    The recorded location, not the configured warehouse: a command run with another (or no) warehouse
    setting still finds the tickets and marks of the loads that wrote there.
    """
    return _directory_of(store, db_name, _recorded(store, db_name))


def _recorded(store: Metastore, db_name: str) -> Database | None:
    try:
        return store.catalog.get_database(db_name)
    except NoSuchDatabaseError:
        return None


def _directory_of(store: Metastore, db_name: str, db: Database | None) -> str:
    return (db.location_uri if db is not None else None) or store.catalog.default_db_location(db_name)


def cleanup_database(store: Metastore, db_name: str) -> CleanupResult:
    """Remove everything under a replica database's directory that no metadata names (``repl cleanup``).

    Retirements of earlier loads that are due are carried out first (recycling what they replaced).
    """
    retired = Retirer(store, db_name).run_tickets()
    roots = [(root, None) for root in own_directories(store, db_name)]
    return CleanupResult(retired, locked_cleanup(store, db_name, roots, keep_root=True, sweep=True))


def own_directories(store: Metastore, db_name: str) -> list[str]:
    """The directories whose whole content belongs to the replica database: its own (``replica_root``), and
    its external root when it records one (``replica_layout``); a sweep of the replica covers both."""
    db = _recorded(store, db_name)
    external = db.parameters.get(EXTERNAL_ROOT) if db is not None else None
    return [_directory_of(store, db_name, db), *([external] if external else [])]


def tickets_dir(store: Metastore, db_name: str) -> str:
    """Where a replica database's retirement tickets wait (see ``RETIRING_DIR``)."""
    return join_uri(replica_root(store, db_name), RETIRING_DIR)


def retire_due(store: Metastore, db_name: str) -> Retired:
    """Carry out the due retirements of one replica database; a failure is logged, never raised.

    Run by commands that touch a replica (status, verify, lag, ...) so replaced versions do not wait for
    the next load once their readers' grace period has passed; those commands' own work must not fail
    because a directory could not be removed (the next pass retries).
    """
    try:
        return Retirer(store, db_name).run_tickets()
    except Exception:  # housekeeping on the side: retried by the next command, load or server pass
        log.exception("retiring the replaced versions of replica database '%s' failed", db_name)
        return Retired()


def replica_databases(store: Metastore) -> list[str]:
    """Names of the databases bootstrapped as replicas (``hmsrepl.replica.of``), the ones loads retire in."""
    names = []
    with store.events.reader() as conn:
        query = select(dbs.c.name, dbs.c.doc).where(dbs.c.doc.contains(REPLICA_OF, autoescape=True))
        for name, doc in conn.execute(query):
            if REPLICA_OF in (json.loads(doc).get("parameters") or {}):
                names.append(name)
    return sorted(names)


def retire_due_everywhere(store: Metastore) -> Retired:
    """Due retirements of every replica database of this metastore (the server's housekeeping pass)."""
    total = Retired()
    for name in replica_databases(store):
        total += retire_due(store, name)
    return total


class Retirer:
    """Retires the directories committed batches stopped naming, each after the grace period."""

    def __init__(self, store: Metastore, db_name: str, grace_seconds: float | None = None) -> None:
        self.store, self.db = store, db_name
        self.grace = retire_grace_seconds() if grace_seconds is None else grace_seconds
        self.pending: list[tuple[float, list[Retirement]]] = []

    @property
    def tickets(self) -> str:
        return tickets_dir(self.store, self.db)

    def schedule(self, retirements: list[Retirement]) -> None:
        if retirements:
            self.pending.append((time.monotonic() + self.grace, retirements))

    def defer(self) -> None:
        """Hand what is not yet due to a later load: one ticket per batch, with its wall-clock due time."""
        fs = self.store.cm.files  # tickets live in the replica's directory
        for due, batch in self.pending:
            wall_due = time.time() + max(0.0, due - time.monotonic())
            doc = {
                "due": wall_due,
                "retirements": [
                    {"directory": r.directory, "carried": sorted(r.carried), "recycle": r.recycle}
                    | ({"standby": r.standby, "whole": r.whole} if r.standby else {})
                    for r in batch
                ],
            }
            fs.makedirs(self.tickets)
            fs.write_bytes(join_uri(self.tickets, f"{wall_due:.3f}-{uuid.uuid4().hex[:8]}.json"), _dumps(doc))
        self.pending.clear()

    def run_tickets(self) -> Retired:
        """Carry out the earlier loads' retirements that are due now; each ticket goes once done.

        Loads, ``repl cleanup``, the commands touching a replica and the server's housekeeping all call
        this: a ticket another process carried out meanwhile is skipped (its directories are gone and
        ``read_tickets`` passes over a vanished ticket).
        """
        retired = Retired()
        tickets = self.tickets
        fs = self.store.cm.files  # tickets and retired directories lie below the replica's roots
        if not fs.exists(tickets):
            return retired
        for uri, due, batch in read_tickets(fs, tickets):
            if due > time.time():
                continue
            present = [r for r in batch if fs.exists(r.directory)]
            retired += Retired(len(present), self._retire_batch(batch))
            fs.delete(uri)
        fs.remove_empty_directory(tickets)
        return retired

    def run_due(self, *, wait: bool = False) -> int:
        """Retire what is due (``wait``: everything, sleeping out the grace period first)."""
        removed = 0
        while self.pending:
            due, batch = self.pending[0]
            delay = due - time.monotonic()
            if delay > 0:
                if not wait:
                    break
                time.sleep(delay)
            removed += self._retire_batch(batch)
            self.pending.pop(0)
        return removed

    def _retire_batch(self, batch: list[Retirement]) -> int:
        """One batch's retirements: standbys parked, the rest removed; how many files were removed or recycled."""
        from hmsrepl.replication.standby import park_or_drop, standby_of  # standby builds on this module

        rest, recycled = batch, 0
        fs = self.store.cm.files
        if any(r.standby or (r.recycle and fs.has_entry(standby_of(r.directory))) for r in batch):
            try:
                with self.store.events.transaction():
                    self.store.catalog.lock_database(self.db)  # no batch claims a standby meanwhile
                    rest, recycled = park_or_drop(self.store, batch)
            except NoSuchDatabaseError:
                pass  # dropped meanwhile: removed as usual below (nothing names its directories)
        if not rest:
            return recycled
        return recycled + locked_cleanup(
            self.store, self.db, [(r.directory, r.carried if r.recycle else None) for r in rest]
        )
