"""A string constant written into a statement's text instead of bound as a parameter.

SQLAlchemy binds ``literal("x")`` as a parameter: every run of the statement then hands the value to the
driver again, and mysqlclient escapes each bound value in Python (a single ``create_table`` bound ten such
constants, a fifth of its values). A constant in the text costs nothing per run, and the statement's text
stays the same, so it is compiled once and served from SQLAlchemy's compiled cache as before.

Only constants of the program itself go here, never a value from a client: the text is quoted, not escaped
by the driver, so a value with a quote is refused.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, String, literal_column


def constant(value: str) -> ColumnElement[str]:
    """``value`` as a quoted string in the statement's text (see the module's docstring)."""
    if "'" in value or "\\" in value or "%" in value:
        raise ValueError(f"SQL constant {value!r}: a quote, backslash or percent sign must be bound instead")
    return literal_column(f"'{value}'", String())
