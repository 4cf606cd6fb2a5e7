"""Limits on what one request, and all of them together, may cost the metastore: bytes, connections, workers,
memory, time, partitions, filter size.

Kept apart from ``MetastoreConfig`` because they bound the serving process rather than describe the
catalog; read from the same ``HMSREPL_*`` environment. Defaults follow Hive's where Hive has one.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ResourceBounds(BaseSettings):
    """Per-request and per-server limits (environment prefix ``HMSREPL_``)."""

    model_config = SettingsConfigDict(env_prefix="HMSREPL_", extra="ignore")

    thrift_max_message_bytes: int = Field(
        default=100 * 1024 * 1024,
        gt=0,
        description="Largest Thrift request accepted (Hive: hive.metastore.server.max.message.size).",
    )
    thrift_max_workers: int = Field(
        default=200,
        gt=0,
        description="Calls processed at once (Hive: hive.metastore.server.max.threads); more wait for a "
        "worker. Connections are held apart from workers (thrift_max_connections).",
    )
    thrift_max_connections: int = Field(
        default=1000,
        gt=0,
        description="Connections held open at once (idle ones cost no thread). At the limit a new client "
        "closes, at once, the longest-idle connection of the address holding the most (one of its own address "
        "only when idle thrift_handshake_seconds); when none may be closed it is refused.",
    )
    thrift_max_connections_per_peer: int = Field(
        default=200,
        gt=0,
        description="Connections held open from one client address; a new one beyond it closes that "
        "address's longest-idle connection when idle thrift_handshake_seconds (never another client's), "
        "else it is refused.",
    )
    thrift_admin_reserved_connections: int = Field(
        default=20,
        ge=0,
        description="Of thrift_max_connections, how many only authenticated admin principals "
        "(HMSREPL_ADMIN_USERS, with Kerberos) may hold; their calls also go first to a free worker.",
    )
    thrift_handshake_seconds: float = Field(
        default=5.0,
        gt=0,
        description="A new connection must start its first call (or, with Kerberos, SASL) within this "
        "long, and finish TLS/SASL within 30 s; else it is closed.",
    )
    thrift_memory_budget_bytes: int = Field(
        default=1024 * 1024 * 1024,
        gt=0,
        description="Memory for requests being received and decoded and replies being written, server-wide; "
        "work that does not fit waits thrift_memory_wait_seconds, then is refused with a retriable "
        "MetaException naming this limit.",
    )
    thrift_memory_wait_seconds: float = Field(
        default=2.0, ge=0, description="How long work waits for the memory budget before it is refused."
    )
    thrift_client_timeout_seconds: float = Field(
        default=600.0,
        ge=0,
        description="Close a connection idle this long, and refuse a request not fully received in this time "
        "(0: never).",
    )
    thrift_drain_seconds: float = Field(
        default=30.0, ge=0, description="On SIGTERM, wait this long for calls in flight to finish."
    )
    max_partitions_per_call: int = Field(
        default=100_000,
        description="Partitions one call may return (Hive: hive.metastore.limit.partition.request; "
        "-1: no limit).",
    )
    filter_max_chars: int = Field(default=100_000, gt=0, description="Longest partition filter accepted.")
    filter_max_terms: int = Field(default=1_000, gt=0, description="Comparisons in one partition filter.")
    filter_max_depth: int = Field(default=50, gt=0, description="Nesting of AND/OR/NOT/parentheses.")
    filter_statement_timeout_seconds: float = Field(
        default=30.0, ge=0, description="Database time one partition-filter query may take (0: no limit)."
    )


@lru_cache(maxsize=1)
def resource_bounds() -> ResourceBounds:
    """The process's bounds, read from the environment once."""
    return ResourceBounds()


__all__ = ["ResourceBounds", "resource_bounds"]
