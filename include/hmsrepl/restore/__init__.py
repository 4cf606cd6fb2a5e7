"""Point-in-time restore: undrop tables, partitions and databases, and revert tables to an earlier event.

The notification log holds every object's metadata as of each change and the data files each change added
or removed (checksummed); cmroot keeps the content of every file a drop or an overwrite took away. So the
state of a table as of any event the log still holds can be rebuilt (``history`` reads the log backwards to
the table's creation, ``images`` replays it forward, checking each listing against the count and digest the
source recorded), checked against what cmroot still holds (``planner``), shown (``preview``) and applied
through the catalog's ordinary write path (``executor``): a restore is logged as ordinary events, so
replicas follow it like any write and ``repl verify`` holds after it.
"""
