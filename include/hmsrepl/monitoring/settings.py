"""Where metrics go, read from ``HMSREPL_METRICS_*`` like every other setting.

Both routes are off by default: a metrics port is one more listening socket, and a textfile directory is one
more place written to, so an operator turns each on deliberately.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from hmsrepl.exceptions import HmsReplError


class MetricsSettingsError(HmsReplError):
    """An ``HMSREPL_METRICS_*`` setting has a value that cannot be used."""


class MetricsSettings(BaseSettings):
    """Metrics settings (environment prefix ``HMSREPL_METRICS_``)."""

    model_config = SettingsConfigDict(env_prefix="HMSREPL_METRICS_", extra="ignore")

    port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="HTTP port of the metastore server's Prometheus endpoint (/metrics); 0 turns it off.",
    )
    host: str = Field(
        default="127.0.0.1",
        description="Address the metrics endpoint listens on (loopback by default; it has no authentication).",
    )
    textfile_dir: str = Field(
        default="",
        description="Directory where replication runs write .prom files for node_exporter's textfile "
        "collector (written atomically); empty turns it off.",
    )


def metrics_settings(**overrides: Any) -> MetricsSettings:
    """The settings from the environment with ``overrides`` (command-line options) applied; a bad value is
    one line naming the variable and what it must be, instead of pydantic's multi-line report."""
    try:
        return MetricsSettings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        name = f"HMSREPL_METRICS_{field.upper()}" if field else "HMSREPL_METRICS_*"
        raise MetricsSettingsError(
            f"invalid {name} {first.get('input')!r}: {first['msg']}; fix or unset it"
        ) from exc
