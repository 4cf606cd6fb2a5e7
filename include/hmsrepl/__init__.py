"""Hive-style warehouse replication: transactional metastore, change manager and replication engine."""

__version__ = "0.1.0"
