"""A write lock on a protected replica is refused; read locks are still granted.

Hive takes a lock as the first step of every ACID and non-ACID write (``SHARED_WRITE``, ``EXCL_WRITE``,
``EXCLUSIVE``). A lock logs no event, so the commit check never sees it: it is judged when it is requested
(``protection.check_write_locks``), on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.locks import LockComponent
from hmsrepl.metastore.protection import ReplicaProtectedError
from tests.security.test_protected_renames import replica  # noqa: F401 - the fixture
from tests.security.untouched import Untouched


@pytest.mark.parametrize("lock_type", ["SHARED_WRITE", "EXCL_WRITE", "EXCLUSIVE"])
def test_a_write_lock_on_a_protected_replica_is_refused(replica: Metastore, lock_type: str) -> None:  # noqa: F811
    guarded = [replica.config.warehouse, replica.config.cmroot]
    before = Untouched.take(guarded, [replica])
    components = [
        LockComponent("SHARED_READ", "scratch", "mine"),
        LockComponent(lock_type, "sales_dr", "orders"),
    ]
    with pytest.raises(ReplicaProtectedError) as info:
        replica.locks.lock(components, user="attacker")
    message = str(info.value)
    assert "'sales_dr' is a protected replica of 'sales'" in message and "\n" not in message
    assert replica.locks.show_locks() == []  # nothing queued, not even the request's other component
    before.assert_same(guarded, [replica])


def test_read_locks_on_a_protected_replica_are_granted(replica: Metastore) -> None:  # noqa: F811
    result = replica.locks.lock([LockComponent("SHARED_READ", "sales_dr", "orders")], user="reader")
    assert result.state == "ACQUIRED"
    replica.locks.unlock(result.lock_id)
