"""The README's main job (``make demo`` runs ``hmsrepl demo``) works end to end on the embedded defaults.

It runs the project's DAGs (bootstrap, then incremental) with dag.test() and real spark-submit tasks, and
ends with ``hmsrepl repl verify`` for each replica.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import REPO

pytestmark = pytest.mark.spark


def test_main_job_replicates_through_the_dags_and_verifies(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},  # the demo sets up its own
        "PYTHONPATH": str(REPO / "include"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "hmsrepl.cli", "demo", "--home", str(tmp_path / "demo")],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    # Both DAGs ran, every run succeeded.
    assert (
        "DAG runs: hmsrepl_bootstrap success, hmsrepl_bootstrap success, hmsrepl_incremental success" in out
    )
    # The operator's verify command said so for each replica, and the summary agrees.
    assert "sales_dr equals sales: metadata and file checksums match" in out
    assert "hr_dr equals hr: metadata and file checksums match" in out
    assert out.count("equals the source") == 2 and "DIFFERS" not in out
    # The ACID table (committed and aborted txns) is part of the story, and the Variables mirror repl.last.id.
    assert "ABORT_TXN" in out and "COMMIT_TXN" in out and "clicks" in out
    for db in ("sales", "hr"):
        line = next(line for line in out.splitlines() if line.strip().startswith(f"{db}_dr: repl.last.id"))
        last = line.split("repl.last.id ")[1].split()[0]
        assert f"hmsrepl_repl_last_id__{db} = {last})" in line
    # A newcomer's run is quiet: no warning from the product or its libraries (Airflow, Spark, the JVM) lands
    # between its steps; the JVM's own output is kept in the demo's Spark log instead.
    noise = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if re.search(r"\bwarn(ing)?\b|deprecat", line, re.IGNORECASE)
    ]
    assert not noise, "\n".join(noise)
    assert "incubator" in (tmp_path / "demo" / "spark-driver.log").read_text()
    # The replica is real: its own metastore and warehouse with copies of the data files.
    replica_files = [p for p in (tmp_path / "demo" / "target" / "warehouse").rglob("*") if p.is_file()]
    assert any(p.name.startswith("part-") for p in replica_files)
