"""A transaction the database cancelled to break a deadlock is told apart from other errors."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError

from hmsrepl.metastore.database import is_deadlock


class _MySQLError(Exception):
    pass


class _PostgresError(Exception):
    def __init__(self, pgcode: str) -> None:
        super().__init__("error")
        self.pgcode = pgcode


def _operational(orig: Exception) -> OperationalError:
    return OperationalError("SELECT 1", {}, orig)


def test_deadlock_victims_are_recognised_on_mariadb_and_postgresql() -> None:
    assert is_deadlock(_operational(_MySQLError(1213, "Deadlock found when trying to get lock")))
    assert is_deadlock(_operational(_PostgresError("40P01")))


def test_other_errors_are_not_deadlocks() -> None:
    assert not is_deadlock(_operational(_MySQLError(1205, "Lock wait timeout exceeded")))
    assert not is_deadlock(_operational(_PostgresError("23505")))
    assert not is_deadlock(ValueError("1213"))
