"""An operator's notifier for the tests (``HMSREPL_ON_DEADLINE_CALLBACK=tests.airflow.alert_recorder:record``):
one JSON line per alert in ``HMSREPL_TEST_ALERTS_FILE``. Imports nothing else, so Airflow's processes can
load it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ALERTS_ENV = "HMSREPL_TEST_ALERTS_FILE"
CALLBACK = f"{__name__}:record"


def record(alert: dict[str, Any]) -> None:
    with open(os.environ[ALERTS_ENV], "a") as out:
        out.write(json.dumps(alert, default=str) + "\n")


def recorded(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
