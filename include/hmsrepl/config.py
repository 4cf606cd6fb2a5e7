"""Metastore settings, read from the environment so the CLI, servers, Spark apps and DAGs share one source.

Every setting has an embedded default under ``./var`` so a fresh checkout runs with no configuration.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_HOME = Path("var")


class MetastoreConfig(BaseSettings):
    """Settings of one metastore instance (environment prefix ``HMSREPL_``)."""

    model_config = SettingsConfigDict(env_prefix="HMSREPL_", extra="ignore")

    db_url: str = Field(
        default=f"sqlite:///{DEFAULT_HOME / 'metastore.db'}",
        description=(
            "SQLAlchemy URL of the metastore database (sqlite, postgresql+psycopg, mysql+mysqldb; "
            "mysql+pymysql also works)."
        ),
    )
    # The embedded roots are made absolute when the settings are read, against the working directory then:
    # a process that imported this module elsewhere (a server forked per command) must not inherit its own.
    warehouse: str = Field(
        default_factory=lambda: str((DEFAULT_HOME / "warehouse").absolute()), description="Warehouse root."
    )
    cmroot: str = Field(
        default_factory=lambda: str((DEFAULT_HOME / "cmroot").absolute()), description="Change manager root."
    )
    cm_enabled: bool = Field(default=True, description="Recycle dropped and replaced files into cmroot.")
    trash_root: str = Field(
        default_factory=lambda: os.path.expanduser("~/.Trash"),
        description="Hadoop trash of the writers (fs.trash.interval > 0): overwritten files are adopted into cmroot.",
    )
    managed_roots: list[str] = Field(
        default_factory=list,
        description="Roots besides the warehouse where managed databases, tables and partitions may live (JSON list).",
    )
    external_roots: list[str] = Field(
        default_factory=list,
        description="Roots besides the warehouse where EXTERNAL tables and partitions may live (JSON list).",
    )
    cm_retention_seconds: int = Field(default=24 * 3600, description="Keep recycled files this long.")
    intent_lease_seconds: float = Field(
        default=60.0,
        description="Periodic housekeeping completes pending file intents not worked on for this long.",
    )
    event_ttl_seconds: int = Field(default=7 * 24 * 3600, description="Keep notification events this long.")
    compress_events: bool = Field(default=True, description="Store large event messages gzip+base64.")
    compress_min_bytes: int = Field(
        default=1024,
        description="Messages at least this big are compressed (the snapshots are most of an event: a Spark "
        "append's pair stores ~1.7 KB instead of ~4.8 KB).",
    )
    txn_timeout_seconds: int = Field(default=300, description="Abort open txns without heartbeat this long.")
    compaction_delta_threshold: int = Field(
        default=10,
        ge=1,
        description="The compaction initiator queues a compaction of an insert-only table or partition once "
        "it holds more than this many delta directories (Hive's hive.compactor.delta.num.threshold).",
    )
    compaction_delta_pct_threshold: float = Field(
        default=0.1,
        gt=0,
        description="Past the delta threshold, the initiator queues a major compaction when the deltas' bytes "
        "exceed this fraction of the base's (or there is no base), else a minor one that merges the deltas "
        "and keeps the base (Hive's hive.compactor.delta.pct.threshold).",
    )
    compaction_check_interval_seconds: float = Field(
        default=0.0,
        ge=0,
        description="A serving metastore runs a compaction pass (initiator, copy-engine worker, cleaner, aborted "
        "writes) this often; 0: never (Hive 3's default: hive.compactor.initiator.on=false), compaction then runs "
        "from 'hmsrepl compact' or the hmsrepl_compaction DAG (Spark).",
    )
    compaction_cleaner_delay_seconds: float = Field(
        default=300.0,
        ge=0,
        description="The compaction cleaner waits this long after a compaction before removing what it made "
        "obsolete, for readers that listed files without a txn (Hive's hive.compactor.cleaner.retention.time).",
    )
    compaction_history_retention_succeeded: int = Field(
        default=3,
        ge=0,
        description="Ended compactions kept per table or partition in the succeeded state; older ones are "
        "purged by the compaction pass (Hive's hive.compactor.history.retention.succeeded).",
    )
    compaction_history_retention_failed: int = Field(
        default=3, ge=0, description="Likewise for failed ones (hive.compactor.history.retention.failed)."
    )
    compaction_history_retention_did_not_initiate: int = Field(
        default=2,
        ge=0,
        description="Likewise for locations the initiator could not examine "
        "(hive.compactor.history.retention.did.not.initiate).",
    )
    compaction_history_retention_refused: int = Field(
        default=3,
        ge=0,
        description="Likewise for compactions a worker found nothing to do for "
        "(metastore.compactor.history.retention.refused).",
    )
    compaction_history_retention_timeout_seconds: float = Field(
        default=7 * 24 * 3600,
        ge=0,
        description="Failed, not initiated and refused compactions older than this are purged once a later "
        "compaction of the same location succeeded (metastore.compactor.history.retention.timeout).",
    )
    notification_api_auth: bool = Field(default=True, description="Remote notification API for admins only.")
    admin_users: list[str] = Field(default_factory=lambda: ["hive", "admin", "root"])

    # -- the Thrift port's front door (hmsrepl.thrift.auth): who may connect and who they are -----------------
    thrift_auth: Literal["none", "kerberos"] = Field(
        default="none",
        description="'kerberos': SASL GSSAPI as Hive does it (hive.metastore.sasl.enabled); identity comes "
        "from the authenticated principal. 'none': set_ugi names the user, so the port is loopback-only.",
    )
    thrift_insecure: bool = Field(
        default=False,
        description="Allow serving without authentication on a non-loopback address (trusted networks only).",
    )
    kerberos_principal: str = Field(
        default="",
        description="The server's principal, e.g. hive/_HOST@REALM (_HOST: the server's host name).",
    )
    kerberos_keytab: str = Field(default="", description="Keytab holding the server principal's keys.")
    thrift_sasl_qop: Literal["auth", "auth-int", "auth-conf"] = Field(
        default="auth",
        description="Least SASL protection accepted (stronger ones are offered too): auth, auth-int "
        "(signed frames) or auth-conf (encrypted frames); Hadoop's hadoop.rpc.protection.",
    )
    proxy_users: dict[str, dict[str, list[str]]] = Field(
        default_factory=dict,
        description='Who may act as whom, like hadoop.proxyuser.<user>.users/hosts: {"svc": {"users": '
        '["alice"], "hosts": ["10.0.0.0/8"]}}; "*" allows any.',
    )
    thrift_tls_cert: str = Field(
        default="", description="PEM certificate (chain) for TLS on the Thrift port."
    )
    thrift_tls_key: str = Field(default="", description="PEM private key of thrift_tls_cert.")

    # -- metadata cache (hmsrepl.cache): write-id-consistent across metastore instances on one database --
    cache_enabled: bool = Field(
        default=False,
        description="Serve table/partition/database reads from a cache kept current from the notification log.",
    )
    cache_prewarm: bool = Field(default=True, description="Load every table at start-up (in the background).")
    cache_max_entries: int = Field(default=2_000_000, description="Cached tables plus partitions, at most.")
    cache_max_bytes: int = Field(
        default=2 * 1024**3, description="Cached objects' JSON size, at most (Python objects take ~3-5x)."
    )
    cache_refresh_interval_seconds: float = Field(
        default=0.5, description="How often the cache polls the notification log when idle."
    )
    cache_event_batch_size: int = Field(default=1000, description="Events fetched per notification-log read.")
    cache_freshness: Literal["equal", "contains"] = Field(
        default="contains",
        description="Serve an entry whose committed write ids equal the reader's, or also ones that contain them.",
    )
    cache_metrics_log_interval_seconds: float = Field(
        default=60.0, description="How often metrics are logged."
    )
    cache_monotonic_wait_seconds: float = Field(
        default=0.05,
        description="How long a read waits for the cache to reach what this instance already answered "
        "(else the database answers).",
    )
