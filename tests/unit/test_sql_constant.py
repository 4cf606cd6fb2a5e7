"""A constant written into a statement's text: the same text for every run, and no client value in it."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.dialects import mysql, postgresql, sqlite

from hmsrepl.metastore.sql_constant import constant


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect(), mysql.dialect()])
def test_a_constant_is_in_the_text_and_binds_nothing(dialect: object) -> None:
    compiled = select(constant("table").label("kind")).compile(dialect=dialect)  # type: ignore[arg-type]
    assert "'table'" in str(compiled)
    assert compiled.params == {}


@pytest.mark.parametrize("value", ["it's", "back\\slash", "100%"])
def test_a_value_the_text_would_have_to_escape_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="must be bound instead"):
        constant(value)
