"""Every failure of a CLI command as one line on stderr and a non-zero exit, never a Python traceback.

Operators and DAG tasks read the last line of stderr: a traceback buries the reason under frames of code they
did not write, and a usage error printed over four lines (usage, hint, blank, error) is cut by log viewers.
The product's own errors already say what went wrong and what to do; anything else (a file that cannot be
read, input nested too deeply, a bug) is named by its kind and first line. ``HMSREPL_CLI_TRACEBACK=1``
lets unexpected errors through with their traceback, for a bug report.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click
from sqlalchemy.exc import SQLAlchemyError

from hmsrepl.exceptions import HmsReplError

TRACEBACK_ENV = "HMSREPL_CLI_TRACEBACK"
MAX_LINE_CHARS = 2000


def one_line(text: str) -> str:
    """``text`` on one bounded line (messages may quote what the user passed)."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3] + "..."


def describe(exc: BaseException) -> str:
    """What went wrong, for an operator: the product's message as it is, else the kind of failure."""
    if isinstance(exc, HmsReplError):
        return str(exc)
    if isinstance(exc, SQLAlchemyError):  # the driver's reason, without the statement and its parameters
        reason = str(getattr(exc, "orig", None) or exc.__class__.__name__)
        return f"database error: {reason}; check the database URL and that its server is running"
    if isinstance(exc, RecursionError):
        return "the input nests too deeply to be read (a corrupt or hostile document); nothing was changed"
    if isinstance(exc, MemoryError):
        return "out of memory while reading the input (a corrupt or hostile document?); nothing was changed"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": '{exc.filename}'" if exc.filename else ""
        return f"{exc.strerror}{where}"
    first = str(exc).strip() or "(no message)"
    return f"{type(exc).__name__}: {first} (set {TRACEBACK_ENV}=1 to see where)"


class OneLineErrors(click.Group):
    """The top-level group: usage errors, refusals and unexpected failures all end as one ``Error:`` line."""

    def main(  # type: ignore[override]  # click's overloads split on Literal[True]; one signature serves both
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        standalone_mode: bool = True,
        **kwargs: Any,
    ) -> Any:
        if not standalone_mode:  # a caller that handles exceptions itself
            return super().main(args, prog_name, standalone_mode=False, **kwargs)
        try:
            code = super().main(args, prog_name, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            _fail("aborted", 1)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            _fail(exc.format_message() + hint, exc.exit_code)
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code)
        except Exception as exc:
            if os.environ.get(TRACEBACK_ENV):
                raise
            _fail(describe(exc), 1)
        sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"Error: {one_line(message)}", err=True)
    sys.exit(code)
