"""Databases, tables, partitions and functions, each change committed together with its event.

Data files are captured inside the write's transaction, after the table's row is locked
(``metastore.capture``): the location is listed, compared with the recorded listing, and only new or changed
files are read; events carry that diff (message format 2). Files a drop removes are recycled into cmroot
only after it committed, so a failed commit never loses data. The work owed after a commit (recycling,
removing a dropped object's directory, making a new object's directory) is recorded as a durable intent in
the same transaction (``metastore.intents``): a crash after the commit leaves it for housekeeping to finish,
and a new object never adopts the files of a dropped one of the same name.
"""

from __future__ import annotations

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore.catalog.constraints import ConstraintCatalog
from hmsrepl.metastore.catalog.core import CatalogCore, CatalogFamily
from hmsrepl.metastore.catalog.data import DataCatalog
from hmsrepl.metastore.catalog.databases import DatabaseCatalog
from hmsrepl.metastore.catalog.functions import FunctionCatalog
from hmsrepl.metastore.catalog.partition_reads import PartitionReads
from hmsrepl.metastore.catalog.partitions import PartitionCatalog
from hmsrepl.metastore.catalog.rows import DEFAULT_DB, Decode
from hmsrepl.metastore.catalog.tables import TableCatalog, TransactionalTruncate
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.location_policy import LocationPolicy

__all__ = ["DEFAULT_DB", "CatalogService", "Decode"]


class CatalogService(CatalogFamily):
    """The catalog as callers know it: one object whose methods are those of its families.

    Each family (databases, tables, partition reads and writes, data changes, functions) is a class of its
    own over one shared ``CatalogCore``, so every write of every family commits through the same event log,
    location policy and intents. This class only composes them and names their public methods.
    """

    def __init__(
        self,
        events: EventLog,
        cm: ChangeManager,
        warehouse: str,
        trash_root: str = "",
        *,
        policy: LocationPolicy | None = None,
    ) -> None:
        super().__init__(CatalogCore(events, cm, warehouse, trash_root, policy=policy))
        core = self.core
        self.functions = FunctionCatalog(core)
        self.partition_reads = PartitionReads(core)
        self.tables = TableCatalog(core, self.partition_reads)
        self.constraints = ConstraintCatalog(self.tables)
        self.tables.parent_follower = self.constraints.follow_parent  # foreign keys follow their parent
        self.partitions = PartitionCatalog(core, self.partition_reads)
        self.data = DataCatalog(core, self.partition_reads)
        self.databases = DatabaseCatalog(core, self.tables, self.functions)
        # databases
        self.default_db_location = core.default_db_location
        self.get_database = core.get_database
        self.create_database = self.databases.create_database
        self.get_databases = self.databases.get_databases
        self.lock_database = self.databases.lock_database
        self.alter_database = self.databases.alter_database
        self.drop_database = self.databases.drop_database
        # tables
        self.get_table = core.get_table
        self.create_table = self.tables.create_table
        self.create_tables = self.tables.create_tables
        self.find_table = self.tables.find_table
        self.get_table_objects = self.tables.get_table_objects
        self.existing_table_names = self.tables.existing_table_names
        self.get_tables = self.tables.get_tables
        self.alter_table = self.tables.alter_table
        self.truncate_table = self.tables.truncate_table
        self.drop_table = self.tables.drop_table
        # partitions
        self.add_partitions = self.partitions.add_partitions
        self.alter_partitions = self.partitions.alter_partitions
        self.drop_partitions = self.partitions.drop_partitions
        self.get_partition = self.partition_reads.get_partition
        self.get_partitions_by_names = self.partition_reads.get_partitions_by_names
        self.partitions_of = self.partition_reads.partitions_of
        self.get_partitions = self.partition_reads.get_partitions
        self.get_partition_names = self.partition_reads.get_partition_names
        self.get_partitions_ps = self.partition_reads.get_partitions_ps
        self.get_partition_names_ps = self.partition_reads.get_partition_names_ps
        self.get_partitions_by_filter = self.partition_reads.get_partitions_by_filter
        self.get_partition_docs = self.partition_reads.get_partition_docs
        # data changes and recorded listings
        self.insert = self.data.insert
        self.reconcile_listing = self.data.reconcile_listing
        self.describe_data = self.data.describe_data
        self.describe_partitions = self.data.describe_partitions
        self.recorded_listings = self.data.recorded_listings
        self.dump_listing = self.data.dump_listing
        self.dump_partition_listings = self.data.dump_partition_listings
        # functions
        self.create_function = self.functions.create_function
        self.get_function = self.functions.get_function
        self.get_functions = self.functions.get_functions
        self.drop_function = self.functions.drop_function

    @classmethod
    def for_config(cls, events: EventLog, cm: ChangeManager, config: MetastoreConfig) -> CatalogService:
        """The catalog of a metastore configured by ``config``, with its location policy."""
        return cls(events, cm, config.warehouse, config.trash_root, policy=LocationPolicy.for_config(config))

    @property
    def transactional_truncate(self) -> TransactionalTruncate | None:
        """How a transactional table is truncated (``TableCatalog.transactional_truncate``)."""
        return self.tables.transactional_truncate

    @transactional_truncate.setter
    def transactional_truncate(self, truncate: TransactionalTruncate | None) -> None:
        self.tables.transactional_truncate = truncate

    @property
    def locations(self) -> LocationPolicy:
        return self.core.locations

    @locations.setter
    def locations(self, policy: LocationPolicy) -> None:
        """Callers (tests, the metastore's own set-up) may give the catalog another location policy."""
        self.core.locations = policy
