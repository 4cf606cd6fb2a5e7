"""A write-id-consistent metadata cache for several metastore instances on one database (HIVE-21637's design).

Each instance caches tables (with their partitions) and databases, follows the notification log in a
background thread, and answers a read from the cache only when the cached entry shows exactly what the
reader's ValidWriteIdList says it must see; otherwise the read goes to the database. Modules:

- ``freshness``: the rule comparing an entry's tag with a reader's list.
- ``entries`` / ``store``: cached tables, their tags and held-back changes; the LRU budget.
- ``apply``: replaying events (writes held back until COMMIT_TXN, aborts dropped, DDL conservatively).
- ``loader`` / ``updater``: loading tables race-free, prewarm, the log-following thread, full reloads.
- ``attribution``: how a metadata change names its txn (EnvironmentContext in, a stamp in the event).
- ``service`` / ``reads``: lookups with hit/miss reasons, and catalog reads that fall back to the database.
"""

from hmsrepl.cache.freshness import Freshness, Verdict, compare, may_serve
from hmsrepl.cache.metrics import MissReason
from hmsrepl.cache.reads import CachedReads
from hmsrepl.cache.service import Answer, CacheSettings, MetadataCache

__all__ = [
    "Answer",
    "CacheSettings",
    "CachedReads",
    "Freshness",
    "MetadataCache",
    "MissReason",
    "Verdict",
    "compare",
    "may_serve",
]
