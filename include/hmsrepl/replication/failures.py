"""One-line explanations of why a load failed, naming the cause and what to do.

A load that fails on something outside the product (the target database went away, the disk filled up, the
object store is unreachable) must say so in one line an operator can act on, not in a traceback: which
resource failed, that nothing of the failed batch is visible (its new directories were removed), and that
running the same load again continues where it stopped.
"""

from __future__ import annotations

import errno
import os
import signal

from hmsrepl.exceptions import HmsReplError


class LoadFailedError(HmsReplError):
    """A load stopped on an error of its environment; the message says which and how to continue."""


RERUN = "nothing of the failed batch is visible on the replica; run the same REPL LOAD again to continue"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def explain_load_failure(exc: BaseException, target_db: str) -> HmsReplError | None:
    """The product error to raise for ``exc`` (None: raise ``exc`` itself, e.g. it already is one)."""
    if isinstance(exc, HmsReplError):
        return None
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        where = f" under '{exc.filename}'" if exc.filename else ""
        return LoadFailedError(
            f"load into '{target_db}' failed: no space left on the target file system{where} (the failed "
            f"batch's copies were removed); free space or grow the file system, then {RERUN.split('; ', 1)[1]}"
        )
    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # pragma: no cover - sqlalchemy is a dependency
        SQLAlchemyError = ()  # type: ignore[assignment,misc]
    if isinstance(exc, SQLAlchemyError):
        return LoadFailedError(
            f"load into '{target_db}' failed: the target metastore database failed ({type(exc).__name__}: "
            f"{_first_line(getattr(exc, 'orig', None) or exc)}); check that it is up and reachable; {RERUN}"
        )
    module = type(exc).__module__ or ""
    if module.startswith(("botocore", "boto3", "urllib3")):
        return LoadFailedError(
            f"load into '{target_db}' failed: the object store failed ({type(exc).__name__}: "
            f"{_first_line(exc)}); check the endpoint and credentials; {RERUN}"
        )
    if isinstance(exc, OSError):
        return LoadFailedError(
            f"load into '{target_db}' failed: {exc.strerror or _first_line(exc)}"
            + (f" ('{exc.filename}')" if exc.filename else "")
            + f"; fix the file system, then {RERUN.split('; ', 1)[1]}"
        )
    return None


# -- test-only fault injection ----------------------------------------------------------------------------
KILL_AT_ENV = "HMSREPL_TEST_KILL_AT_STEP"
_steps = 0


def fault_point() -> None:
    """A step of a load where a crash must be survivable: with ``HMSREPL_TEST_KILL_AT_STEP=n`` set, the
    process kills itself (SIGKILL, no cleanup at all) at the n-th step. Unset (always, outside the kill
    tests) this only counts."""
    global _steps
    _steps += 1
    target = os.environ.get(KILL_AT_ENV)
    if target and _steps == int(target):
        os.kill(os.getpid(), signal.SIGKILL)
