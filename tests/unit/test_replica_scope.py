"""What a replica records about its loads (policy, metadata-only), what a verify compares, and which
directories outside its database's directory a replica owns."""

from __future__ import annotations

import re

import pytest

from hmsrepl.replication.commands import CommandError
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.replica_dirs import OwnedDirectory, merge
from hmsrepl.replication.replica_scope import (
    METADATA_ONLY,
    POLICY,
    ReplicaScope,
    VerifyScopeError,
    verify_scope,
)


@pytest.mark.parametrize(
    ("before", "load", "bootstrap", "after"),
    [
        ({}, ReplicaScope("sales", True), True, {POLICY: "sales", METADATA_ONLY: "true"}),
        # a load with data after a metadata-only one: the data it skipped is still missing
        (
            {METADATA_ONLY: "true"},
            ReplicaScope("sales", False),
            False,
            {POLICY: "sales", METADATA_ONLY: "true"},
        ),
        # a bootstrap with data replaces everything
        ({METADATA_ONLY: "true"}, ReplicaScope("sales", False), True, {POLICY: "sales"}),
        # REPLACE: the newest policy is the replica's
        ({POLICY: "sales"}, ReplicaScope("sales.['t1']"), False, {POLICY: "sales.['t1']"}),
    ],
)
def test_loads_record_their_scope(
    before: dict[str, str], load: ReplicaScope, bootstrap: bool, after: dict[str, str]
) -> None:
    assert load.record({"repl.last.id": "5", **before}, bootstrap=bootstrap) == {"repl.last.id": "5", **after}


def test_a_given_scope_wins_over_the_recorded_one() -> None:
    recorded = {POLICY: "sales.['t1']", METADATA_ONLY: "true"}
    assert verify_scope({}, "sales", "dr") == verify_scope({}, "sales", "dr", "sales.'.*'")  # every table
    assert verify_scope({}, "sales", "dr").policy is None
    scope = verify_scope(recorded, "Sales", "dr")
    assert (scope.policy, scope.metadata_only) == (ReplicationPolicy("sales", ("t1",)), True)
    assert "recorded by the replica's loads" in scope.describe() and "metadata only" in scope.describe()
    given = verify_scope(recorded, "sales", "dr", "sales.'t2'", metadata_only=False)
    assert (given.policy, given.metadata_only) == (ReplicationPolicy("sales", ("t2",)), False)


def test_a_policy_of_another_database_is_refused() -> None:
    with pytest.raises(VerifyScopeError, match="is a policy of database 'crm', not of 'sales'"):
        verify_scope({}, "sales", "dr", "crm.'t1'")
    with pytest.raises(VerifyScopeError, match=re.escape("loaded with policy crm.['t1'] of database 'crm'")):
        verify_scope({POLICY: "crm.['t1']"}, "sales", "dr")
    with pytest.raises(CommandError, match="Hive error 20021"):
        verify_scope({}, "sales", "dr", "sales.[t1]")


def test_a_replica_owns_the_versions_of_its_objects_not_their_neighbours() -> None:
    owned = OwnedDirectory("/wh/_external/data", frozenset({"e1", "e2"}))
    assert owned.owns("e1/d=0.hmsrepl-v47/") and owned.owns("e2.hmsrepl-v3/") and owned.owns("e2/x.csv")
    assert not owned.owns("e3/") and not owned.owns("e10.hmsrepl-v3/") and not owned.owns("e1x/")
    assert OwnedDirectory("/wh/_external/dr").owns("anything/")


def test_merge_unites_names_and_drops_what_a_whole_directory_covers() -> None:
    merged = merge(
        [
            OwnedDirectory("/wh/_external/dr/data", frozenset({"e1"})),
            OwnedDirectory("/wh/_external/dr/data/", frozenset({"e2"})),
            OwnedDirectory("/wh/_external/other", frozenset({"e3"})),
        ]
    )
    assert merged == [
        OwnedDirectory("/wh/_external/dr/data", frozenset({"e1", "e2"})),
        OwnedDirectory("/wh/_external/other", frozenset({"e3"})),
    ]
    with_root = merge([*merged, OwnedDirectory("/wh/_external/dr")])
    assert with_root == [
        OwnedDirectory("/wh/_external/dr"),
        OwnedDirectory("/wh/_external/other", frozenset({"e3"})),
    ]
