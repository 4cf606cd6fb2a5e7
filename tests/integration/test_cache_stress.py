"""The randomised stress run (``tests.cache_stress``) sized to half a minute: 2 cached server processes on
one PostgreSQL database, writers on both, aborts, unclaimed DDL, a restart every 8 s, reader sessions with
their own lists. No answer may go backwards for its session or show a write its list does not count.

``HMSREPL_TEST_STRESS_SECONDS`` sets the length (default 20 s of load: the run keeps both cores busy, and
``make test`` runs on two); ``bench/cache_stress.py`` runs it
for hundreds of thousands of reads.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cache_stress import StressSettings, run_stress, stress_database

pytestmark = pytest.mark.postgres

SECONDS = float(os.environ.get("HMSREPL_TEST_STRESS_SECONDS", "20"))


def test_cached_instances_under_aborts_restarts_and_invalidations_answer_exactly(tmp_path: Path) -> None:
    with stress_database(tmp_path) as url:
        outcome = run_stress(tmp_path, url, StressSettings(seconds=SECONDS, restart_every=8.0))
    checker = outcome.checker
    print(f"stress: {outcome!r}")
    seed = f"seed {outcome.seed}"
    assert outcome.errors == [], seed
    assert checker.backwards == [], f"{seed}: {checker.backwards[:5]}"
    assert checker.uncommitted == [], f"{seed}: {checker.uncommitted[:5]}"
    # The run exercised what it claims to: enough answers, aborts, invalidations, a restart, cache hits.
    assert checker.reads >= 300, seed
    assert outcome.aborts > 0 and outcome.commits > 0 and outcome.invalidations > 0, seed
    assert outcome.restarts >= 1, seed
    assert sum(outcome.hits) > 0, f"{seed}: the caches answered none of the reads"
