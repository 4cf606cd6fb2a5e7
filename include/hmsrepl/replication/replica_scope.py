"""What a replica replicates, recorded on it by its loads, so that a verify checks what was promised.

A table-level policy replicates some tables of the source database, and a metadata-only dump
(``'hive.repl.dump.metadata.only'='true'``) replicates no data: comparing such a replica with the whole
source database, data files included, reports differences that are the policy's own choices. So each load
records, as parameters of the replica database (target-only: never compared, never replicated):

- ``hmsrepl.repl.policy``: the policy of the dump it loaded, as dumps record it (a REPLACE changes it);
- ``hmsrepl.repl.metadata.only``: set once a metadata-only dump is loaded. Only a bootstrap with data ends
  it: the data a metadata-only load skipped stays missing (an incremental load with data cannot build on it
  and asks for a new bootstrap).

The position and the scope it was loaded with change in the same database change (``TargetWriter.set_last_id``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hmsrepl.exceptions import HmsReplError
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.layout import DumpMetadata
from hmsrepl.replication.policy import ReplicationPolicy

POLICY = "hmsrepl.repl.policy"
METADATA_ONLY = "hmsrepl.repl.metadata.only"
SCOPE_PARAMS = (POLICY, METADATA_ONLY)


@dataclass(frozen=True)
class ReplicaScope:
    """The policy (its text; None: not recorded) and whether the replica's data is replicated."""

    policy: str | None = None
    metadata_only: bool = False

    @classmethod
    def of_dump(cls, meta: DumpMetadata) -> ReplicaScope:
        return cls(meta.policy or None, meta.metadata_only)

    @classmethod
    def recorded(cls, params: Mapping[str, str]) -> ReplicaScope:
        """What a replica database's parameters record (nothing for replicas loaded before it was recorded)."""
        return cls(params.get(POLICY) or None, params.get(METADATA_ONLY, "false").lower() == "true")

    def record(self, params: Mapping[str, str], *, bootstrap: bool) -> dict[str, str]:
        """``params`` with this load's scope recorded; a bootstrap with data ends the metadata-only mark."""
        out = dict(params)
        if self.policy:
            out[POLICY] = self.policy
        if self.metadata_only:
            out[METADATA_ONLY] = "true"
        elif bootstrap:
            out.pop(METADATA_ONLY, None)
        return out


class VerifyScopeError(HmsReplError):
    """A verify's policy does not fit the databases it compares."""


@dataclass(frozen=True)
class VerifyScope:
    """What one verify compares: the policy's tables (None: all) and whether data files are compared."""

    policy: ReplicationPolicy | None
    metadata_only: bool
    policy_origin: str = ""
    mode_origin: str = ""

    def describe(self) -> str:
        """One line for the operator: what was compared and why."""
        tables = (
            f"policy {self.policy.to_text()} ({self.policy_origin})"
            if self.policy is not None
            else "every table"
        )
        data = (
            f"metadata only, data files not compared ({self.mode_origin})"
            if self.metadata_only
            else "metadata and file checksums"
        )
        return f"{tables}; {data}"


def verify_scope(
    params: Mapping[str, str],
    source_db: str,
    target_db: str,
    policy: str | None = None,
    metadata_only: bool | None = None,
) -> VerifyScope:
    """The scope of verifying replica ``target_db`` (its database ``params``) against ``source_db``.

    A given policy or mode wins; otherwise what the replica's loads recorded; otherwise the whole database
    with its data. Refuses (one line) a policy of another database than ``source_db``.
    """
    recorded = ReplicaScope.recorded(params)
    if policy is not None:
        parsed: ReplicationPolicy | None = parse_policy(policy)
        origin = "given"
        if parsed is not None and parsed.db_name != source_db.lower():
            raise VerifyScopeError(
                f"--policy {policy} is a policy of database '{parsed.db_name}', not of '{source_db}'; "
                f"write the policy of '{source_db}' (e.g. {source_db}.'<regex>')"
            )
    elif recorded.policy is not None:
        parsed, origin = parse_policy(recorded.policy), "recorded by the replica's loads"
        if parsed.db_name != source_db.lower():
            raise VerifyScopeError(
                f"replica '{target_db}' was loaded with policy {recorded.policy} of database '{parsed.db_name}', "
                f"not '{source_db}'; verify it against '{parsed.db_name}', or give --policy"
            )
    else:
        parsed, origin = None, ""
    if metadata_only is not None:
        mode, mode_origin = metadata_only, "given"
    else:
        mode, mode_origin = recorded.metadata_only, "the replica was loaded from a metadata-only dump"
    if parsed is not None and parsed.include is None and not parsed.exclude:
        parsed, origin = None, ""  # the whole database
    return VerifyScope(parsed, mode, origin, mode_origin)
