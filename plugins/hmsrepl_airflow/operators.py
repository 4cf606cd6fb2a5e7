"""Operators that make the replication DAGs read well: check before the heavy work, mirror state after it.

The target database's ``repl.last.id`` is the source of truth for how far a replica got; these operators
only read it (over the target metastore's Thrift API) and mirror it into an Airflow Variable for the UI.
Configuration mistakes (missing connection, no bootstrap yet, malformed replications) fail the task at once
without retries; an unreachable metastore fails it with retries (it may come back).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Variable
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from hmsrepl.replication.replications import Replication, ReplicationConfigError, parse_replications
from hmsrepl_airflow.app_settings import application_environment, side_database
from hmsrepl_airflow.callbacks import freshness_alert
from hmsrepl_airflow.hooks import MetastoreConfigError, MetastoreHookError, MetastoreNotificationHook
from hmsrepl_airflow.launcher import AppRun, run_app
from hmsrepl_airflow.lineage import ReplicatedWindow, operator_lineage
from hmsrepl_airflow.settings import (
    BOOTSTRAP_DAG_ID,
    REPLICAS_ASSET_ALIAS,
    REPLICATIONS_ENV,
    SOURCE_CONN_ID,
    SPARK_CONN_ID,
    TARGET_CONN_ID,
    batch_limit,
    configuration_problems,
    freshness_deadline_seconds,
    replica_asset,
    spark_app,
    spark_min_events,
    variable_key,
)


def _replications(value: Any) -> list[Replication]:
    try:
        found = parse_replications(value, origin="replications")
    except ReplicationConfigError as exc:
        raise AirflowFailException(str(exc)) from exc
    if not found:
        raise AirflowFailException(
            f"no replications configured: set {REPLICATIONS_ENV} (JSON list of policy/target_db) or trigger the "
            'DAG with {"replications": [{"policy": "sales", "target_db": "sales_dr"}]}'
        )
    return found


def _hook_failure(exc: MetastoreHookError) -> Exception:
    """Misconfiguration fails for good; anything else (server down) may be retried."""
    if isinstance(exc, MetastoreConfigError):
        return AirflowFailException(str(exc))
    return exc


def lag_behind_seconds(
    source: MetastoreNotificationHook, replica_event_id: int, source_event_id: int
) -> int | None:
    """Seconds between the source's event ``source_event_id`` and the replica's ``repl.last.id`` event.

    0 when the replica is at the source's event; None when either event is no longer in the source's log
    (cleaned up) or cannot be read: lag is reported, never a reason to fail a replication task.
    """
    if replica_event_id >= source_event_id:
        return 0
    try:
        [newest] = source.next_events(source_event_id - 1, 1)
        at = source.next_events(replica_event_id - 1, 1) if replica_event_id > 0 else []
    except (MetastoreHookError, ValueError):
        return None
    if not at or at[0].event_id != replica_event_id:
        return None
    return max(0, newest.event_time - at[0].event_time)


class ReplicationCheckOperator(BaseOperator):
    """Reads where each replica is (target ``repl.last.id``) against the source's current event id.

    With ``require_bootstrap`` a replica without ``repl.last.id`` fails the task with a message saying to run
    the bootstrap DAG; with ``skip_when_caught_up`` the run's remaining tasks are skipped (no spark-submit)
    when the source has logged nothing since. Returns, per target database, its last id, the source's
    current id and how many of the source database's events are pending.
    """

    template_fields: Sequence[str] = ("replications",)

    def __init__(
        self,
        *,
        replications: Any,
        require_bootstrap: bool = True,
        skip_when_caught_up: bool = True,
        source_conn_id: str = SOURCE_CONN_ID,
        target_conn_id: str = TARGET_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.replications = replications
        self.require_bootstrap = require_bootstrap
        self.skip_when_caught_up = skip_when_caught_up
        self.source_conn_id = source_conn_id
        self.target_conn_id = target_conn_id

    def execute(self, context: Any) -> dict[str, dict[str, Any]]:
        replications = _replications(self.replications)
        source = MetastoreNotificationHook(self.source_conn_id)
        target = MetastoreNotificationHook(self.target_conn_id)
        try:
            current = source.current_event_id()
            state: dict[str, dict[str, Any]] = {}
            never_bootstrapped: list[Replication] = []
            for replication in replications:
                last = target.repl_last_id(replication.target_db)
                if last is None:
                    never_bootstrapped.append(replication)
                pending = source.events_count(replication.source_db, last or 0, current)
                state[replication.target_db] = {
                    "policy": replication.policy,
                    "repl_last_id": last,
                    "source_event_id": current,
                    "pending_events": pending,
                }
                self.log.info(
                    "%s <- %s: repl.last.id %s, source at event %d, %d events of %s pending",
                    replication.target_db,
                    replication.policy,
                    last if last is not None else "none (never bootstrapped)",
                    current,
                    pending,
                    replication.source_db,
                )
        except MetastoreHookError as exc:
            raise _hook_failure(exc) from exc
        if self.require_bootstrap and never_bootstrapped:
            raise AirflowFailException(
                "; ".join(
                    f"target database '{r.target_db}' has no repl.last.id: policy '{r.policy}' was never "
                    f"bootstrapped into it; trigger the {BOOTSTRAP_DAG_ID} DAG with "
                    f'{{"policy": "{r.policy}", "target_db": "{r.target_db}"}} first'
                    for r in never_bootstrapped
                )
            )
        if self.skip_when_caught_up and all(
            s["repl_last_id"] is not None and s["repl_last_id"] >= current for s in state.values()
        ):
            raise AirflowSkipException(f"every replica is caught up with source event {current}")
        return state


class MirrorReplLastIdOperator(BaseOperator):
    """Copies each replica's ``repl.last.id`` from the target into the Variable named for its policy.

    The Variable is a read-only mirror for people and other DAGs; it is written only from what the target
    database records, so it never runs ahead of the replica.
    """

    template_fields: Sequence[str] = ("replications",)

    def __init__(self, *, replications: Any, target_conn_id: str = TARGET_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.replications = replications
        self.target_conn_id = target_conn_id

    def execute(self, context: Any) -> dict[str, int]:
        target = MetastoreNotificationHook(self.target_conn_id)
        mirrored: dict[str, int] = {}
        for replication in _replications(self.replications):
            try:
                last = target.repl_last_id(replication.target_db)
            except MetastoreHookError as exc:
                raise _hook_failure(exc) from exc
            if last is None:
                raise AirflowFailException(
                    f"target database '{replication.target_db}' has no repl.last.id after replication of "
                    f"'{replication.policy}'; run the {BOOTSTRAP_DAG_ID} DAG for it"
                )
            Variable.set(variable_key(replication.policy), str(last))
            self.log.info(
                "Variable %s = %d (%s)", variable_key(replication.policy), last, replication.target_db
            )
            mirrored[variable_key(replication.policy)] = last
        return mirrored


class ReplicationPlanOperator(BaseOperator):
    """The incremental run's plan: the configuration checked, then one replication per mapped task.

    Malformed settings (schedule, limits, timeouts, the replications list) fail here, once, with a line
    naming the variable and the fix, and without retries: the DAG keeps parsing whatever the environment
    holds, so this is where a typo becomes visible. Reads the ``replications`` param itself (a list, or a
    JSON string), so it is never encoded twice by a template.
    """

    def execute(self, context: Any) -> list[dict[str, str]]:
        problems = configuration_problems()
        if problems:
            raise AirflowFailException("; ".join(problems))
        params = context.get("params") or {}
        return [r.to_dict() for r in _replications(params.get("replications"))]


class ReplicateOperator(BaseOperator):
    """One replication, end to end: check, catch up (or bootstrap), mirror, and mark its Asset.

    Mapped once per replication, so each has its own retries, log and state, and a broken one never stops
    the others. Nothing starts when the policy's database logged nothing new; a few pending events run as a
    plain Python process (no JVM); more, or a bootstrap, go to spark-submit. Failures retrying cannot fix
    (never bootstrapped, bad configuration, refused dump) fail without retries; outages retry.
    """

    template_fields: Sequence[str] = ("replication", "limit")

    def __init__(
        self,
        *,
        replication: Any,
        limit: Any = None,
        bootstrap: bool = False,
        source_conn_id: str = SOURCE_CONN_ID,
        target_conn_id: str = TARGET_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.replication = replication
        self.limit = limit
        self.bootstrap = bootstrap
        self.source_conn_id = source_conn_id
        self.target_conn_id = target_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        [replication] = _replications(
            [self.replication] if isinstance(self.replication, dict) else self.replication
        )
        context["target_db"] = replication.target_db  # names the mapped task instance in the UI
        source = MetastoreNotificationHook(self.source_conn_id)
        target = MetastoreNotificationHook(self.target_conn_id)
        try:
            before = target.repl_last_id(replication.target_db)
            current = source.current_event_id()
            pending = None if before is None else source.events_count(replication.source_db, before, current)
        except MetastoreHookError as exc:
            raise _hook_failure(exc) from exc
        if before is None and not self.bootstrap:
            raise AirflowFailException(
                f"target database '{replication.target_db}' has no repl.last.id: policy '{replication.policy}' "
                f"was never bootstrapped into it; trigger the {BOOTSTRAP_DAG_ID} DAG with "
                f'{{"policy": "{replication.policy}", "target_db": "{replication.target_db}"}} first'
            )
        freshness = self._freshness(context, source, replication, before, current, pending)
        self.log.info(
            "%s <- %s: repl.last.id %s, source at event %d, %s events of %s pending, %s",
            replication.target_db,
            replication.policy,
            before if before is not None else "none",
            current,
            "all" if pending is None else pending,
            replication.source_db,
            "age of the oldest unknown" if freshness is None else f"the oldest {freshness} s old",
        )
        if not self.bootstrap and pending == 0:
            Variable.set(variable_key(replication.policy), str(before))
            raise AirflowSkipException(
                f"{replication.target_db} is caught up: no event of {replication.source_db} after {before}"
            )
        on_spark = self.bootstrap or (pending or 0) >= spark_min_events()
        args = ["--replications", json.dumps([replication.to_dict()]), "--limit", str(self._limit())]
        if self.bootstrap:
            args.insert(0, "--bootstrap")
        try:  # the applications' metastore settings: from the same connections, with their identities
            env = application_environment({"source": source, "target": target}, os.environ)
        except MetastoreHookError as exc:
            raise _hook_failure(exc) from exc
        run_app(AppRun(args, on_spark, name=f"hmsrepl-{replication.target_db}", env=env), self.log)
        try:
            after = target.repl_last_id(replication.target_db)
        except MetastoreHookError as exc:
            raise _hook_failure(exc) from exc
        if after is None:
            raise AirflowFailException(
                f"target database '{replication.target_db}' has no repl.last.id after replicating "
                f"'{replication.policy}'; run the {BOOTSTRAP_DAG_ID} DAG for it"
            )
        Variable.set(variable_key(replication.policy), str(after))
        self._replicated = ReplicatedWindow(replication.source_db, replication.target_db, before, after)
        lag = max(0, current - after)
        lag_seconds = lag_behind_seconds(source, after, current)
        if before is None or after > before:
            self._mark_fresh(context, replication.target_db, after, current)
        self.log.info(
            "%s at event %d (was %s); lag behind the source's event %d: %d events, %s s",
            replication.target_db,
            after,
            before,
            current,
            lag,
            "unknown" if lag_seconds is None else lag_seconds,
        )
        return {
            **replication.to_dict(),
            "repl_last_id": after,
            "previous_repl_last_id": before,
            "source_event_id": current,
            "lag_events": lag,
            "lag_seconds": lag_seconds,
            "freshness_lag_seconds": freshness,
            "on_spark": on_spark,
        }

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Lineage for Airflow's OpenLineage provider: the source tables read and the replica tables written
        (``lineage``); nothing when the run replicated nothing."""
        from airflow.providers.openlineage.extractors import OperatorLineage

        window: ReplicatedWindow | None = getattr(self, "_replicated", None)
        if window is None:
            return OperatorLineage()
        source = MetastoreNotificationHook(self.source_conn_id)
        target = MetastoreNotificationHook(self.target_conn_id)
        try:
            return operator_lineage(source, target, window)
        except MetastoreHookError as exc:  # lineage is reported, never a reason to fail the replication
            self.log.warning("no lineage for %s: %s", window.target_db, exc)
            return OperatorLineage()

    def _freshness(
        self,
        context: Any,
        source: MetastoreNotificationHook,
        replication: Replication,
        before: int | None,
        current: int,
        pending: int | None,
    ) -> int | None:
        """Seconds since the oldest event of the policy's database the replica lacks (0: none); past the
        freshness deadline it raises the alert (``callbacks.freshness_alert``) before any work, so a replica
        whose catch-up then fails has been reported too. None when unknown (never bootstrapped, log cleaned):
        freshness is reported, never a reason to fail."""
        if before is None:
            return None
        if not pending:
            return 0
        try:
            oldest = source.first_event_of(replication.source_db, before, current)
        except MetastoreHookError as exc:
            self.log.warning("freshness of %s unknown: %s", replication.target_db, exc)
            return None
        if oldest is None:
            return None
        lag = max(0, int(time.time()) - oldest.event_time)
        deadline = freshness_deadline_seconds()
        if deadline and lag > deadline:
            freshness_alert(
                target_db=replication.target_db,
                policy=replication.policy,
                lag_seconds=lag,
                deadline_seconds=deadline,
                since_event_id=oldest.event_id,
                run_id=str(context.get("run_id", "")),
                logger=self.log,
            )
        return lag

    def _limit(self) -> int:
        try:
            return max(1, int(self.limit)) if self.limit not in (None, "") else batch_limit()
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"limit {self.limit!r} is not a whole number >= 1") from exc

    @staticmethod
    def _mark_fresh(context: Any, target_db: str, repl_last_id: int, source_event_id: int) -> None:
        """An Asset event for this replica only (through the alias the mapped task declares)."""
        from airflow.sdk import AssetAlias

        events = context.get("outlet_events")
        if events is None:
            return
        events[AssetAlias(REPLICAS_ASSET_ALIAS)].add(
            replica_asset(target_db),
            extra={"repl_last_id": repl_last_id, "source_event_id": source_event_id},
        )


class PruneDumpsOperator(BaseOperator):
    """Removes dump directories older than the retention, keeping any a replica must still finish loading.

    Runs in the worker (no Spark: it lists and deletes small metadata files). The dump root is
    ``HMSREPL_DUMP_ROOT``; the target's database comes from the target connection as for the applications
    (``app_settings.side_database``); without a target database URL every old dump is removed.
    """

    def __init__(
        self, *, retention_seconds: int, target_conn_id: str = TARGET_CONN_ID, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.retention_seconds = retention_seconds
        self.target_conn_id = target_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        from hmsrepl.config import MetastoreConfig
        from hmsrepl.exceptions import HmsReplError, is_retryable
        from hmsrepl.metastore import Metastore
        from hmsrepl.replication.retention import dumps_in_use, prune_dumps

        dump_root = os.environ.get("HMSREPL_DUMP_ROOT", "var/repl")
        try:
            target_url = side_database(
                "target", MetastoreNotificationHook(self.target_conn_id), os.environ
            ).get("db_url")
        except MetastoreHookError as exc:
            raise _hook_failure(exc) from exc
        try:
            in_use: set[str] = set()
            if target_url:
                target = Metastore(MetastoreConfig(db_url=target_url))
                try:
                    in_use = dumps_in_use(target)
                finally:
                    target.close()
            result = prune_dumps(dump_root, self.retention_seconds, in_use=in_use)
        except (HmsReplError, OSError) as exc:
            message = f"pruning dumps under {dump_root} failed: {' '.join(str(exc).split())}"
            raise (AirflowException(message) if is_retryable(exc) else AirflowFailException(message)) from exc
        self.log.info(
            "dump root %s: removed %d dumps (%d bytes), kept %d recent and %d still being loaded",
            dump_root,
            len(result.removed),
            result.bytes_removed,
            len(result.kept_recent),
            len(result.kept_in_use),
        )
        return {"removed": len(result.removed), "bytes_removed": result.bytes_removed}


class CmrootCleanupOperator(BaseOperator):
    """``spark_apps/cm_cleanup.py`` for one side, its cmroot from that side's metastore connection (extra
    ``cmroot``, as the replication applications get it), else the application's ``HMSREPL_<SIDE>_CMROOT``.

    It runs as a plain Python process in the worker, as a small replication does (``launcher``): the
    application lists cmroot and deletes on driver threads, and starts a Spark session on the Spark
    connection's master only when at least ``--spark-min-files`` files expired. A daily cleanup that deletes
    a few files therefore starts no JVM (spark-submit alone costs ~20 s).
    """

    def __init__(
        self,
        *,
        side: str,
        metastore_conn_id: str,
        conn_id: str = SPARK_CONN_ID,
        name: str = "hmsrepl-cm-cleanup",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.side = side
        self.metastore_conn_id = metastore_conn_id
        self.conn_id = conn_id
        self.name = name
        self.application = spark_app("cm_cleanup.py")

    def cleanup_args(self) -> list[str]:
        """``--side <side>``, plus ``--cmroot`` when the connection names it (a path, not a secret)."""
        try:
            settings = side_database(self.side, MetastoreNotificationHook(self.metastore_conn_id), {})
        except MetastoreHookError as exc:
            raise _hook_failure(exc) from exc
        cmroot = settings.get("cmroot")
        return ["--side", self.side, *(["--cmroot", cmroot] if cmroot else [])]

    def execute(self, context: Any) -> None:
        run = AppRun(
            self.cleanup_args(),
            on_spark=False,
            name=self.name,
            spark_conn_id=self.conn_id,
            application="cm_cleanup.py",
        )
        run_app(run, self.log)


class CompactionOperator(BaseOperator):
    """``spark_apps/compact.py`` for one side: a compaction pass over its insert-only tables (initiator,
    worker, cleaner, aborted writes), with that side's settings from its metastore connection.

    A replica compacts on its own (a source compaction is not replicated), so the DAG runs one per side.
    ``engine`` "spark" submits the application (rows rewritten into few files; the JVM starts only when a
    compaction runs), "copy" runs it as a plain Python process.
    """

    def __init__(
        self,
        *,
        side: str,
        metastore_conn_id: str,
        engine: str = "spark",
        conn_id: str = SPARK_CONN_ID,
        name: str = "hmsrepl-compact",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.side = side
        self.metastore_conn_id = metastore_conn_id
        self.engine = engine
        self.conn_id = conn_id
        self.name = name
        self.application = spark_app("compact.py")

    def execute(self, context: Any) -> None:
        try:
            env = application_environment(
                {self.side: MetastoreNotificationHook(self.metastore_conn_id)}, os.environ
            )
        except MetastoreHookError as exc:
            raise _hook_failure(exc) from exc
        run = AppRun(
            ["--side", self.side, "--engine", self.engine],
            on_spark=self.engine == "spark",
            name=self.name,
            spark_conn_id=self.conn_id,
            application="compact.py",
            env=env,
        )
        run_app(run, self.log)


def _side(side: str, conn_id: str) -> Any:
    """The source or target metastore's database, as the applications get it (``app_settings``)."""
    from hmsrepl.config import MetastoreConfig
    from hmsrepl.metastore import Metastore

    try:
        settings = side_database(side, MetastoreNotificationHook(conn_id), os.environ)
    except MetastoreHookError as exc:
        raise _hook_failure(exc) from exc
    if not settings.get("db_url"):
        raise AirflowFailException(
            f"no database URL for the {side} metastore: set extra 'db_url' of Airflow connection '{conn_id}' "
            f"(or HMSREPL_{side.upper()}_DB_URL); it is needed for a failover"
        )
    return Metastore(MetastoreConfig.model_validate(settings))


class FailoverOperator(BaseOperator):
    """Planned failover of one replication (``hmsrepl repl failover``): freeze, last events, verify, promote.

    Runs in the worker with direct access to both metastores' databases (``HMSREPL_SOURCE_*``,
    ``HMSREPL_TARGET_*``, ``HMSREPL_DUMP_ROOT``). Logs the replica's lag before the freeze (events and
    seconds) and the hand-over ids after. Never retried by itself: a failed failover leaves the source frozen
    and says why; run it again (it continues) or lift the freeze with ``hmsrepl repl unprotect``.
    """

    template_fields: Sequence[str] = ("source_db", "target_db", "policy")

    def __init__(self, *, source_db: str, target_db: str, policy: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.source_db = source_db
        self.target_db = target_db
        self.policy = policy

    def execute(self, context: Any) -> dict[str, Any]:
        from hmsrepl.exceptions import HmsReplError
        from hmsrepl.replication.engine import ReplicationEngine
        from hmsrepl.replication.failover import planned_failover, replica_lag

        policy = self.policy or self.source_db
        source, target = _side("source", SOURCE_CONN_ID), _side("target", TARGET_CONN_ID)
        try:
            lag = replica_lag(source, policy, target, self.target_db)
            self.log.info(
                "%s behind %s before the failover: %d events, %.1f s (replica at %d, source at %d)",
                self.target_db,
                policy,
                lag.events,
                lag.seconds,
                lag.replica_event_id,
                lag.source_event_id,
            )
            engine = ReplicationEngine(os.environ.get("HMSREPL_DUMP_ROOT", "var/repl"), source, target)
            result = planned_failover(engine, self.source_db, self.target_db, self.policy or None)
        except HmsReplError as exc:
            raise AirflowFailException(" ".join(str(exc).split())) from exc
        finally:
            source.close()
            target.close()
        self.log.info(
            "failover %s -> %s done: hand-over at source event %d / target event %d, %d events applied, "
            "seconds %s; %s is now a protected replica of %s",
            self.source_db,
            self.target_db,
            result.handover_id,
            result.target_handover_id,
            result.events_applied,
            result.seconds,
            self.source_db,
            self.target_db,
        )
        return result.to_json()


class RestoreOperator(BaseOperator):
    """Point-in-time restore on the source metastore (``hmsrepl restore``): undrop or revert, or preview it.

    A thin shell over ``hmsrepl.restore.service``: the request comes from the trigger form, the preview or
    the one-line summary goes to the task log, and the plan (as JSON) to XCom. Never retried: a refusal (a
    taken name, files gone from cmroot, a protected replica) says why and changes nothing, so a retry would
    only repeat it.
    """

    template_fields: Sequence[str] = (
        "kind",
        "name",
        "into",
        "event",
        "at_time",
        "write_id",
        "partitions",
        "preview",
    )

    def __init__(
        self,
        *,
        kind: str,
        name: str,
        into: str = "",
        event: Any = "",
        at_time: str = "",
        write_id: Any = "",
        partitions: Any = (),
        preview: Any = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.kind, self.name, self.into = kind, name, into
        self.event, self.at_time, self.partitions, self.preview = event, at_time, partitions, preview
        self.write_id = write_id

    def request(self) -> Any:
        """The service's request from the rendered fields (templates render to strings)."""
        from hmsrepl.restore.service import RestoreRequest

        event, write_id = _whole_number(self.event, "event"), _whole_number(self.write_id, "write id")
        parts = self.partitions
        if isinstance(parts, str):
            parts = (
                json.loads(parts)
                if parts.strip().startswith("[")
                else [p for p in parts.split(",") if p.strip()]
            )
        return RestoreRequest(
            str(self.kind).strip(),
            str(self.name).strip(),
            into=str(self.into or "").strip() or None,
            event=event,
            write_id=write_id,
            time=str(self.at_time or "").strip() or None,
            partitions=tuple(str(p).strip() for p in parts),
            preview=str(self.preview).strip().lower() not in ("false", "0", "no", ""),
        )

    def execute(self, context: Any) -> dict[str, Any]:
        from hmsrepl.exceptions import HmsReplError
        from hmsrepl.restore.service import plan_json, preview_text, run_restore, summary

        request = self.request()
        store = _side("source", SOURCE_CONN_ID)
        try:
            plan, result = run_restore(store, request)
        except HmsReplError as exc:
            raise AirflowFailException(" ".join(str(exc).split())) from exc
        finally:
            store.close()
        self.log.info("%s", preview_text(plan) if result is None else summary(plan, result))
        return plan_json(plan)


def _whole_number(value: Any, what: str) -> int | None:
    """A form field holding a whole number, or nothing (empty)."""
    text = str(value if value is not None else "").strip()
    if not text or text == "None":
        return None
    if not text.isdigit():
        raise AirflowFailException(
            f"{what} '{text}' is not a whole number; give one or leave the field empty"
        )
    return int(text)
