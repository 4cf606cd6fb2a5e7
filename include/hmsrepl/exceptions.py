"""Every domain error in one place, named for what went wrong, so callers can catch precisely.

Messages name the object and say what the user can do about it: they are shown to operators as they are.
"""

from __future__ import annotations


class HmsReplError(Exception):
    """Base of all errors this product raises on purpose."""


class MetastoreError(HmsReplError):
    """A metastore request could not be carried out."""


class NoSuchObjectError(MetastoreError):
    """The named database, table, partition, function or transaction does not exist."""


class NoSuchDatabaseError(NoSuchObjectError):
    def __init__(self, db_name: str) -> None:
        super().__init__(f"database '{db_name}' does not exist; create it first or check the name")
        self.db_name = db_name


class NoSuchTableError(NoSuchObjectError):
    def __init__(self, db_name: str, table_name: str) -> None:
        super().__init__(f"table '{db_name}.{table_name}' does not exist; create it first or check the name")
        self.db_name = db_name
        self.table_name = table_name


class NoSuchPartitionError(NoSuchObjectError):
    def __init__(self, db_name: str, table_name: str, partition_name: str) -> None:
        super().__init__(f"partition '{partition_name}' of table '{db_name}.{table_name}' does not exist")
        self.partition_name = partition_name


class NoSuchFunctionError(NoSuchObjectError):
    """Hive's own wording, unquoted: Spark's Hive client tells a missing function (CREATE FUNCTION checks
    first) from a failure by finding '<name> does not exist' in the message."""

    def __init__(self, db_name: str, function_name: str) -> None:
        super().__init__(f"Function {db_name}.{function_name} does not exist")


class NoSuchTxnError(NoSuchObjectError):
    def __init__(self, txn_id: int) -> None:
        super().__init__(f"transaction {txn_id} does not exist; open one with open_txns first")
        self.txn_id = txn_id


class AlreadyExistsError(MetastoreError):
    """An object with that name exists already; creating it again would silently replace it."""


class InvalidObjectError(MetastoreError):
    """The object sent by the client is malformed (bad name, wrong partition values, missing fields)."""


class InvalidPartitionValueError(InvalidObjectError):
    """A partition value Hive's rules refuse (Hive answers MetaException, from validatePartitionNameCharacters)."""


class InvalidOperationError(MetastoreError):
    """The request is well formed but not allowed in the object's current state."""


class LimitExceededError(MetastoreError):
    """A request would cost more than a configured bound allows (partitions per call, filter size, time)."""


class TxnAbortedError(InvalidOperationError):
    def __init__(self, txn_id: int) -> None:
        super().__init__(
            f"transaction {txn_id} was aborted (by a client or because it timed out without heartbeat) "
            "and cannot be committed; retry the work in a new transaction"
        )
        self.txn_id = txn_id


class TxnNotOpenError(InvalidOperationError):
    def __init__(self, txn_id: int, state: str) -> None:
        super().__init__(f"transaction {txn_id} is {state}, not open; start a new transaction")
        self.txn_id = txn_id


class EventsCleanedUpError(MetastoreError):
    """The notification log no longer holds events the caller needs: only a new bootstrap can recover."""

    def __init__(self, after_event_id: int, first_available: int | None) -> None:
        first = "none are left" if first_available is None else f"the oldest left is {first_available}"
        super().__init__(
            f"events after {after_event_id} are missing from the notification log (cleaned up; {first}); "
            "run a bootstrap dump and load to start replication again"
        )
        self.after_event_id = after_event_id
        self.first_available = first_available


class AccessDeniedError(MetastoreError):
    """The remote caller may not use the notification API (admin/proxy users only)."""


class StorageError(HmsReplError):
    """A file operation on the warehouse, cmroot or dump root failed."""


class FileLostError(StorageError):
    """A file named by an event is neither at its original location with the right checksum nor in cmroot."""


class NoSuchLockError(NoSuchObjectError):
    def __init__(self, lock_id: int) -> None:
        super().__init__(
            f"lock {lock_id} does not exist: it was released, or timed out without heartbeat "
            "(HMSREPL_TXN_TIMEOUT_SECONDS); request a new lock"
        )
        self.lock_id = lock_id


class TxnOpenError(InvalidOperationError):
    """A txn's locks are released by its commit or abort, not by unlock."""


class InvalidInputError(InvalidObjectError):
    """A request names something that does not fit the object (e.g. statistics of a column it lacks)."""


class WriteNotVisibleError(MetastoreError):
    """A transactional object's stored state comes from a write id the reader's ValidWriteIdList does not
    count as committed (open, aborted, or too new for it): answering it would show a write the reader must
    not see. Retryable: once a later write has committed, or with a newer list, the read succeeds."""

    def __init__(self, what: str, write_id: int, state: str, write_ids: str) -> None:
        super().__init__(
            f"{what} was last changed by write id {write_id} ({state}), which the reader's ValidWriteIdList "
            f"'{write_ids}' does not count as committed; retry the read with a newer ValidWriteIdList "
            "once a later write has committed"
        )
        self.write_id = write_id
        self.state = state


#: OS errors that say the configuration is wrong (a file where a directory should be, no permission):
#: the same call fails the same way until someone changes the setting.
_CONFIGURATION_OS_ERRORS = (NotADirectoryError, IsADirectoryError, PermissionError, FileExistsError)


def is_retryable(exc: BaseException) -> bool:
    """Whether the same work may succeed later without anyone changing anything.

    Orchestrators retry what this says is retryable (a server down, a network reset, a full disk that a
    cleaner may empty) and fail at once on the rest: refused input, bad configuration, a replica that was
    never bootstrapped, a file lost for good. Storage errors are outages unless their cause is one of the
    OS errors that only a configuration change fixes.
    """
    if isinstance(exc, FileLostError):
        return False
    if isinstance(exc, WriteNotVisibleError):
        return True
    if isinstance(exc, StorageError):
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, _CONFIGURATION_OS_ERRORS):
                return False
            cause = cause.__cause__ or cause.__context__
        return True
    if isinstance(exc, HmsReplError):
        return False
    return not isinstance(exc, (*_CONFIGURATION_OS_ERRORS, ValueError, TypeError, LookupError))
