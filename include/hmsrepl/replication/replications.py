"""Which policies replicate into which target databases: the list an orchestrator runs, checked up front.

Written as JSON, ``[{"policy": "sales", "target_db": "sales_dr"}, ...]``, so the same value works in an
environment variable, an Airflow DAG parameter and a spark-submit argument. Each policy is parsed by the
REPL grammar before anything runs, and one target database has one policy feeding it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from hmsrepl.exceptions import HmsReplError
from hmsrepl.replication.commands import DumpCommand, parse_command

EXAMPLE = '[{"policy": "sales", "target_db": "sales_dr"}]'


class ReplicationConfigError(HmsReplError):
    """The list of replications is malformed; the message names the setting and shows the expected shape."""


def count_setting(name: str, default: int, most: int, meaning: str) -> int:
    """The whole number from 1 to ``most`` in environment variable ``name`` (``default`` when unset); any
    other value is refused in one line (ReplicationConfigError) saying it must be ``meaning``."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= most:
        raise ReplicationConfigError(
            f"{name}={value!r} is not {meaning}: set it so, or unset it for the default"
        )
    return number


@dataclass(frozen=True)
class Replication:
    """One policy replicated into one target database."""

    policy: str
    target_db: str
    command: DumpCommand = field(compare=False, repr=False)  # the policy's bootstrap dump, as parsed

    @property
    def source_db(self) -> str:
        return self.command.policy.db_name

    def to_dict(self) -> dict[str, str]:
        return {"policy": self.policy, "target_db": self.target_db}


def parse_replications(value: Any, origin: str) -> list[Replication]:
    """A JSON string or an already decoded list; ``origin`` names the setting in error messages."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise ReplicationConfigError(f"{origin} is not JSON ({exc}); expected e.g. {EXAMPLE}") from exc
    if not isinstance(value, list):
        raise ReplicationConfigError(f"{origin} must be a JSON list, e.g. {EXAMPLE}")
    found: list[Replication] = []
    for item in value:
        if not isinstance(item, dict) or not item.get("policy") or not item.get("target_db"):
            raise ReplicationConfigError(
                f"{origin}: {item!r} needs a 'policy' and a 'target_db', e.g. {EXAMPLE}"
            )
        policy = str(item["policy"]).strip()
        try:
            command = parse_command(f"REPL DUMP {policy}")
        except HmsReplError as exc:
            raise ReplicationConfigError(f"{origin}: policy {policy!r} is not valid: {exc}") from exc
        if not isinstance(command, DumpCommand) or not command.is_bootstrap:
            raise ReplicationConfigError(f"{origin}: {policy!r} is a policy plus more; give the policy alone")
        found.append(Replication(policy, str(item["target_db"]).strip().lower(), command))
    targets = [r.target_db for r in found]
    if len(set(targets)) != len(targets):
        raise ReplicationConfigError(f"{origin}: each target_db may be fed by one policy only ({targets})")
    return found
