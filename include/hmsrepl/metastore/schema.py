"""The metastore's relational schema (SQLAlchemy Core), the single definition Alembic migrates towards.

Nested Thrift structs (storage descriptor, parameters) are stored as JSON text: the metastore always reads
and writes them whole, so normalising them into Hive's dozen side tables would only add round trips.
Partition key values get their own table because filters on them are pushed down to SQL.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql

from hmsrepl.metastore.locations import LOCATION_KEY_CHARS

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# MySQL's TEXT holds only 64 KiB: JSON documents and event messages need LONGTEXT there.
LongText = Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
# Names are indexed; MySQL limits index keys to 3072 bytes (767 chars of utf8mb4 in a composite key is too much).
NAME = 128
TABLE_NAME = 256
PART_NAME = 700
# A location's lookup key (``locations.key_of``), compared by code point: "inside a directory" is a range of
# keys, which only a binary collation keeps contiguous (PostgreSQL's default collation sorts '/' by locale).
LocationKey = (
    String(LOCATION_KEY_CHARS)
    .with_variant(String(LOCATION_KEY_CHARS, collation="C"), "postgresql")
    .with_variant(
        mysql.VARCHAR(LOCATION_KEY_CHARS, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )
)

dbs = Table(
    "dbs",
    metadata,
    Column("db_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("name", String(NAME), nullable=False, unique=True),
    Column("doc", LongText, nullable=False),
    Column("create_time", BigInteger, nullable=False),
    # Where its location and Hive 4's managed location lie (in the document): overlap checks by index.
    Column("location_key", LocationKey),
    Column("managed_location_key", LocationKey),
    Index(None, "location_key"),
    Index(None, "managed_location_key"),
    sqlite_autoincrement=True,  # ids never reused: a re-created object gets a new id
)

tbls = Table(
    "tbls",
    metadata,
    Column("tbl_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("db_id", BigInteger, ForeignKey("dbs.db_id"), nullable=False),
    Column("tbl_name", String(TABLE_NAME), nullable=False),
    Column("tbl_type", String(32), nullable=False),
    Column("location", Text),
    Column("location_key", LocationKey),  # where the location lies, for overlap checks by index
    Column("doc", LongText, nullable=False),
    Column("write_id", BigInteger, nullable=False, default=0),
    # How many partitions lie elsewhere than at their default place (``placement``); NULL: not known.
    Column("odd_partitions", BigInteger),
    UniqueConstraint("db_id", "tbl_name"),
    Index(None, "location_key"),
    sqlite_autoincrement=True,  # ids never reused: a re-created object gets a new id
)

partitions = Table(
    "partitions",
    metadata,
    Column("part_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("tbl_id", BigInteger, ForeignKey("tbls.tbl_id"), nullable=False),
    Column("part_name", String(PART_NAME), nullable=False),
    Column("location", Text),
    Column("location_key", LocationKey),  # where the location lies, for overlap checks by index
    Column("doc", LongText, nullable=False),
    Column("write_id", BigInteger, nullable=False, default=0),
    UniqueConstraint("tbl_id", "part_name"),
    Index(None, "location_key"),
    sqlite_autoincrement=True,  # ids never reused: a re-created object gets a new id
)

partition_key_vals = Table(
    "partition_key_vals",
    metadata,
    Column("part_id", BigInteger, ForeignKey("partitions.part_id", ondelete="CASCADE"), primary_key=True),
    Column("tbl_id", BigInteger, nullable=False),
    Column("idx", Integer, primary_key=True),
    Column("value", String(TABLE_NAME), nullable=False),
    Index(None, "tbl_id", "idx", "value"),
)

funcs = Table(
    "funcs",
    metadata,
    Column("func_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("db_id", BigInteger, ForeignKey("dbs.db_id"), nullable=False),
    Column("func_name", String(NAME), nullable=False),
    Column("doc", LongText, nullable=False),
    UniqueConstraint("db_id", "func_name"),
    sqlite_autoincrement=True,  # ids never reused: a re-created object gets a new id
)

notification_log = Table(
    "notification_log",
    metadata,
    Column("event_id", BigInteger, primary_key=True, autoincrement=False),
    Column("event_time", BigInteger, nullable=False),
    Column("event_type", String(32), nullable=False),
    Column("cat_name", String(NAME)),
    Column("db_name", String(NAME)),
    Column("tbl_name", String(TABLE_NAME)),
    Column("message", LongText, nullable=False),
    Column("message_format", String(16), nullable=False),
    Index(None, "db_name", "event_id"),
    Index(None, "event_time"),
)

# One row; locked FOR UPDATE by every writing transaction so event ids are gap-free and ordered by commit.
notification_sequence = Table(
    "notification_sequence",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("next_event_id", BigInteger, nullable=False),
)

txns = Table(
    "txns",
    metadata,
    Column("txn_id", BigInteger, primary_key=True, autoincrement=False),
    Column("state", String(1), nullable=False),
    Column("started_at", BigInteger, nullable=False),
    Column("last_heartbeat", BigInteger, nullable=False),
    Column("user_name", String(NAME), nullable=False),
    Column("host_name", String(NAME), nullable=False),
    Column("txn_type", String(16), nullable=False, default="default"),
    Index(None, "state", "last_heartbeat"),
)

txn_sequence = Table(
    "txn_sequence",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("next_txn_id", BigInteger, nullable=False),
)

txn_to_write_id = Table(
    "txn_to_write_id",
    metadata,
    Column("db_name", String(NAME), primary_key=True),
    Column("tbl_name", String(TABLE_NAME), primary_key=True),
    Column("write_id", BigInteger, primary_key=True, autoincrement=False),
    Column("txn_id", BigInteger, nullable=False),
    Index(None, "txn_id"),
)

next_write_id = Table(
    "next_write_id",
    metadata,
    Column("db_name", String(NAME), primary_key=True),
    Column("tbl_name", String(TABLE_NAME), primary_key=True),
    Column("next_write_id", BigInteger, nullable=False),
)

# Files written by each open txn (one row per ACID_WRITE), so COMMIT_TXN can name them all.
txn_write_notifications = Table(
    "txn_write_notifications",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("txn_id", BigInteger, nullable=False),
    Column("write_id", BigInteger, nullable=False),
    Column("db_name", String(NAME), nullable=False),
    Column("tbl_name", String(TABLE_NAME), nullable=False),
    Column("part_name", String(PART_NAME)),
    Column("files", LongText, nullable=False),
    Index(None, "txn_id"),
)

# Replication bookkeeping on a target metastore: which target txn replays each source txn, per replica
# database (Hive's REPL_TXN_MAP). A row lives from the replayed OPEN_TXN to its COMMIT/ABORT_TXN.
repl_txn_map = Table(
    "repl_txn_map",
    metadata,
    Column("replica_db", String(NAME), primary_key=True),
    Column("src_txn_id", BigInteger, primary_key=True, autoincrement=False),
    Column("target_txn_id", BigInteger, nullable=False),
)

# One row per REPL DUMP or REPL LOAD run (Hive's REPLICATION_METRICS): what it covered, counted, took.
repl_metrics = Table(
    "repl_metrics",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("policy", String(TABLE_NAME), nullable=False),
    Column("dump_id", String(TABLE_NAME), nullable=False),
    Column("operation", String(16), nullable=False),  # dump or load
    Column("kind", String(16), nullable=False),  # bootstrap or incremental
    Column("from_event_id", BigInteger),
    Column("to_event_id", BigInteger),
    Column("last_event_id", BigInteger),
    Column("events", BigInteger, nullable=False, default=0),
    Column("tables", BigInteger, nullable=False, default=0),
    Column("partitions", BigInteger, nullable=False, default=0),
    Column("files", BigInteger, nullable=False, default=0),
    Column("bytes", BigInteger, nullable=False, default=0),
    Column("stages", LongText, nullable=False, default="{}"),  # JSON: stage name -> seconds
    Column("status", String(16), nullable=False),  # running, succeeded, failed
    Column("error", LongText),
    Column("started_at", BigInteger, nullable=False),  # epoch milliseconds
    Column("finished_at", BigInteger),
    Index(None, "policy", "id"),
)

# Hive's HIVE_LOCKS: one row per component of a lock request. ``lock_id`` is the id clients see (Hive's
# external id); a request's components are acquired or released together. ``txn_id`` 0 means a standalone
# lock, kept alive by heartbeats; a txn's locks live until the txn commits or aborts.
hive_locks = Table(
    "hive_locks",
    metadata,
    Column("lock_id", BigInteger, primary_key=True, autoincrement=False),
    Column("component", Integer, primary_key=True, autoincrement=False),
    Column("txn_id", BigInteger, nullable=False, default=0),
    Column("db_name", String(NAME), nullable=False),
    Column("tbl_name", String(TABLE_NAME)),
    Column("part_name", String(PART_NAME)),
    Column("state", String(1), nullable=False),  # a: acquired, w: waiting
    Column("lock_type", String(1), nullable=False),  # Hive's encoding: r, w, x, e
    Column("operation", String(16)),
    Column("last_heartbeat", BigInteger, nullable=False),  # epoch milliseconds
    Column("acquired_at", BigInteger),
    Column("user_name", String(NAME), nullable=False),
    Column("host_name", String(NAME), nullable=False),
    Column("agent_info", String(TABLE_NAME)),
    Column("heartbeat_count", Integer, nullable=False, default=0),
    Column("blocked_by", BigInteger),
    Index(None, "db_name", "tbl_name"),
    Index(None, "txn_id"),
)

# One row; every lock decision locks it FOR UPDATE, so decisions are serialised across metastore instances
# (Hive's NEXT_LOCK_ID plays the same part), and it hands out lock ids.
lock_sequence = Table(
    "lock_sequence",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("next_lock_id", BigInteger, nullable=False),
)

# Column statistics of a table (part_id NULL) or of one partition, per column and engine (Hive's
# TAB_COL_STATS / PART_COL_STATS). Keyed by ids: a rename keeps them, a drop removes them (cascade).
# ``stats`` is the ColumnStatisticsData union as JSON: {"longStats": {...}}, binary fields base64.
column_stats = Table(
    "column_stats",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("tbl_id", BigInteger, ForeignKey("tbls.tbl_id", ondelete="CASCADE"), nullable=False),
    Column("part_id", BigInteger, ForeignKey("partitions.part_id", ondelete="CASCADE")),
    Column("part_key", BigInteger, nullable=False, default=0),  # part_id or 0: NULLs are never equal in keys
    Column("col_name", String(NAME), nullable=False),
    Column("col_type", String(NAME), nullable=False),
    Column("engine", String(32), nullable=False, default="hive"),
    Column("stats", LongText, nullable=False),
    Column("last_analyzed", BigInteger, nullable=False),
    UniqueConstraint("tbl_id", "part_key", "col_name", "engine"),
    Index(None, "part_id"),
    sqlite_autoincrement=True,
)

# File work that must follow a committed change (recycle into cmroot, remove or make directories), one row
# per change, inserted in the change's own transaction and deleted once the work is done (see
# ``metastore.intents``). Rows left by a crash are completed by housekeeping after the restart.
file_intents = Table(
    "file_intents",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False),  # recycle or makedirs
    Column("payload", LongText, nullable=False),  # JSON: files (encoded URIs) and directories
    Column("created_at", BigInteger, nullable=False),  # epoch milliseconds
    Column("claimed_at", BigInteger, nullable=False),  # epoch milliseconds of the last attempt's start
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    # epoch milliseconds when the work proved impossible (ENAMETOOLONG...): kept for the operator, not retried
    Column("parked_at", BigInteger),
)

# Each table's or partition's current data files as the metastore last recorded them (event format 2): what a
# write's listing is compared with, so it checksums only files that are new or changed (size or modification
# time differ) and its event carries only the difference. ``part_id`` 0 is the table's own location. Rows are
# keyed by the path below the object's location, so a location move (rename, replica version flip) keeps them.
data_files = Table(
    "data_files",
    metadata,
    Column("tbl_id", BigInteger, nullable=False),
    Column("part_id", BigInteger, nullable=False),
    Column("rel_path", String(PART_NAME), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("mtime_ns", BigInteger, nullable=False),
    Column("checksum", String(64), nullable=False),
    Column("version_id", String(1024)),  # object store version the checksum belongs to
    PrimaryKeyConstraint("tbl_id", "part_id", "rel_path"),
)

# Per recorded table or partition: how many files ``data_files`` holds for it and their listing digest
# (``formats.listing_digest``). A write updates both from its diff, so the count and digest its event carries
# cost O(files added + removed), never a pass over the whole listing. ``unlisted_since`` (ns since the epoch):
# a declared write (an INSERT naming its files) recorded files without listing the location; the listing
# reconciliation (``CatalogService.reconcile_listing``) lists it later and clears it. NULL: the recorded
# listing was last compared with the whole location.
data_listings = Table(
    "data_listings",
    metadata,
    Column("tbl_id", BigInteger, nullable=False),
    Column("part_id", BigInteger, nullable=False),
    Column("file_count", BigInteger, nullable=False),
    Column("digest", String(32), nullable=False),
    Column("unlisted_since", BigInteger),
    # The listing's byte total (Hive's totalSize), kept per diff like file_count; NULL: not summed yet.
    Column("total_size", BigInteger),
    PrimaryKeyConstraint("tbl_id", "part_id"),
    Index(None, "unlisted_since"),
)

# Compactions of insert-only tables (Hive's COMPACTION_QUEUE and COMPLETED_COMPACTIONS in one table): the
# initiator enqueues, a worker claims one and writes base_<highest_write_id>_v<txn_id> in txn ``txn_id``, the
# cleaner removes what that base made obsolete once no txn below ``next_txn_id`` is open. See hmsrepl.acid.
compaction_queue = Table(
    "compaction_queue",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("db_name", String(NAME), nullable=False),
    Column("tbl_name", String(TABLE_NAME), nullable=False),
    Column("part_name", String(PART_NAME)),  # NULL: the table's own location
    Column("type", String(8), nullable=False),  # major
    Column("state", String(24), nullable=False),  # initiated, working, ready for cleaning, succeeded, failed
    Column("highest_write_id", BigInteger),
    Column("txn_id", BigInteger),  # the worker's txn: the base's visibility suffix
    Column("next_txn_id", BigInteger),  # the txn high watermark + 1 when the worker's txn committed
    Column("base_dir", String(PART_NAME)),
    Column("worker", String(NAME)),
    Column("enqueued_at", BigInteger, nullable=False),  # epoch milliseconds, as the other columns here
    Column("started_at", BigInteger),
    Column("ended_at", BigInteger),
    Column("error", Text),
    Index(None, "state"),
)
