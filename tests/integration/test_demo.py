"""The README's main job (``make demo`` runs ``hmsrepl demo``) works end to end on the embedded defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import REPO

pytestmark = pytest.mark.spark


def test_main_job_replicates_and_verifies(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "include"), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-m", "hmsrepl.cli", "demo", "--home", str(tmp_path / "demo")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "sales_dr: repl.last.id" in done.stdout and "hr_dr: repl.last.id" in done.stdout
    assert done.stdout.count("equals the source") == 2
    assert "DIFFERS" not in done.stdout
    # The replica is real: its own metastore and warehouse with copies of the data files.
    replica_files = [p for p in (tmp_path / "demo" / "target" / "warehouse").rglob("*") if p.is_file()]
    assert any(p.name.startswith("part-") for p in replica_files)
