"""Hive's constraint structs (``SQLPrimaryKey`` and friends, one row per column) to and from the table's
constraints (``metastore.constraints``, one entry per constraint).

Rows of one multi-column key share its name and are ordered by ``key_seq``. A row without a name gets one
made of its table and columns, as Hive's DDL names an unnamed constraint. Answers name the table they are
read from, so a replica answers with its own database name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore.constraints import (
    CheckConstraint,
    Constraint,
    DefaultConstraint,
    ForeignKey,
    NotNullConstraint,
    PrimaryKey,
    TableConstraints,
    UniqueConstraint,
)
from hmsrepl.metastore.model import Table
from hmsrepl.thrift.convert import CATALOG
from hmsrepl.thrift.idl import hms


def _name(given: str | None, table: str, kind: str, column: str | None) -> str:
    return (given or f"{table}_{kind}_{column or 'expr'}").lower()


def _flags(row: Any) -> dict[str, bool]:
    return {
        "enable": bool(row.enable_cstr),
        "validated": bool(row.validate_cstr),
        "rely": bool(row.rely_cstr),
    }


def _grouped(rows: Sequence[Any], name_of: Callable[[Any], str]) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    for row in sorted(rows, key=lambda r: r.key_seq or 0):
        groups.setdefault(name_of(row), []).append(row)
    return groups


def table_named(rows: Sequence[Any], db_field: str, table_field: str) -> tuple[str, str]:
    """The one table a request's rows name (Hive's add_* calls find the table from the rows)."""
    names = {((getattr(r, db_field) or "").lower(), (getattr(r, table_field) or "").lower()) for r in rows}
    if len(names) != 1 or not all(all(n) for n in names):
        raise InvalidObjectError(
            "the constraint rows must name one table (their database and table fields); "
            f"got {sorted(names) or 'none'}"
        )
    return names.pop()


def from_thrift(
    table: str,
    primary_keys: Sequence[Any] = (),
    foreign_keys: Sequence[Any] = (),
    unique: Sequence[Any] = (),
    not_null: Sequence[Any] = (),
    defaults: Sequence[Any] = (),
    checks: Sequence[Any] = (),
) -> TableConstraints:
    """The constraints Hive's rows declare for ``table`` (its bare name, used to name unnamed ones)."""
    pks = _grouped(primary_keys, lambda r: _name(r.pk_name, table, "pk", None))
    if len(pks) > 1:
        raise InvalidObjectError(
            f"table '{table}' is given {len(pks)} primary keys ({', '.join(pks)}); give one"
        )
    fks = _grouped(foreign_keys, lambda r: _name(r.fk_name, table, "fk", r.fkcolumn_name))
    uks = _grouped(unique, lambda r: _name(r.uk_name, table, "uk", r.column_name))
    return TableConstraints(
        primary_key=next(
            (
                PrimaryKey(name=n, columns=[r.column_name.lower() for r in rs], **_flags(rs[0]))
                for n, rs in pks.items()
            ),
            None,
        ),
        foreign_keys=[_foreign_key(name, rows) for name, rows in fks.items()],
        unique=[
            UniqueConstraint(name=n, columns=[r.column_name.lower() for r in rs], **_flags(rs[0]))
            for n, rs in uks.items()
        ],
        not_null=[
            NotNullConstraint(
                name=_name(r.nn_name, table, "nn", r.column_name), column=r.column_name.lower(), **_flags(r)
            )
            for r in not_null
        ],
        defaults=[
            DefaultConstraint(
                name=_name(r.dc_name, table, "dc", r.column_name),
                column=r.column_name.lower(),
                value=r.default_value,
                **_flags(r),
            )
            for r in defaults
        ],
        checks=[
            CheckConstraint(
                name=_name(r.dc_name, table, "cc", r.column_name),
                column=r.column_name.lower() if r.column_name else None,
                expression=r.check_expression or "",
                **_flags(r),
            )
            for r in checks
        ],
    )


def _foreign_key(name: str, rows: list[Any]) -> ForeignKey:
    first = rows[0]
    return ForeignKey(
        name=name,
        columns=[r.fkcolumn_name.lower() for r in rows],
        parent_db=(first.pktable_db or "").lower() or None,
        parent_table=(first.pktable_name or "").lower(),
        parent_columns=[(r.pkcolumn_name or "").lower() for r in rows],
        parent_key=first.pk_name.lower() if first.pk_name else None,
        update_rule=first.update_rule or 0,
        delete_rule=first.delete_rule or 0,
        **_flags(first),
    )


def relative(constraints: TableConstraints, db_name: str) -> TableConstraints:
    """Foreign keys whose parent is in ``db_name`` (the table's own database) name no database."""
    keys = [
        k.model_copy(update={"parent_db": None}) if k.parent_db == db_name.lower() else k
        for k in constraints.foreign_keys
    ]
    return constraints.model_copy(update={"foreign_keys": keys})


def _cstr(constraint: Constraint) -> dict[str, bool]:
    """Hive's three flags of a constraint's rows (the inverse of ``_flags``)."""
    return {
        "enable_cstr": constraint.enable,
        "validate_cstr": constraint.validated,
        "rely_cstr": constraint.rely,
    }


def _of(table: Table) -> TableConstraints:
    return table.constraints or TableConstraints()


def primary_keys(table: Table) -> list[Any]:
    key = _of(table).primary_key
    if key is None:
        return []
    return [
        hms.SQLPrimaryKey(
            table_db=table.db_name,
            table_name=table.table_name,
            column_name=column,
            key_seq=seq,
            pk_name=key.name,
            **_cstr(key),
            catName=CATALOG,
        )
        for seq, column in enumerate(key.columns, start=1)
    ]


def foreign_keys(table: Table) -> list[Any]:
    """The foreign keys of ``table`` (as the child)."""
    return [
        hms.SQLForeignKey(
            pktable_db=key.parent_db or table.db_name,
            pktable_name=key.parent_table,
            pkcolumn_name=parent_column,
            fktable_db=table.db_name,
            fktable_name=table.table_name,
            fkcolumn_name=column,
            key_seq=seq,
            update_rule=key.update_rule,
            delete_rule=key.delete_rule,
            fk_name=key.name,
            pk_name=key.parent_key,
            **_cstr(key),
            catName=CATALOG,
        )
        for key in _of(table).foreign_keys
        for seq, (column, parent_column) in enumerate(
            zip(key.columns, key.parent_columns, strict=False), start=1
        )
    ]


def unique_constraints(table: Table) -> list[Any]:
    return [
        hms.SQLUniqueConstraint(
            catName=CATALOG,
            table_db=table.db_name,
            table_name=table.table_name,
            column_name=column,
            key_seq=seq,
            uk_name=key.name,
            **_cstr(key),
        )
        for key in _of(table).unique
        for seq, column in enumerate(key.columns, start=1)
    ]


def not_null_constraints(table: Table) -> list[Any]:
    return [
        hms.SQLNotNullConstraint(
            catName=CATALOG,
            table_db=table.db_name,
            table_name=table.table_name,
            column_name=c.column,
            nn_name=c.name,
            **_cstr(c),
        )
        for c in _of(table).not_null
    ]


def default_constraints(table: Table) -> list[Any]:
    return [
        hms.SQLDefaultConstraint(
            catName=CATALOG,
            table_db=table.db_name,
            table_name=table.table_name,
            column_name=c.column,
            default_value=c.value,
            dc_name=c.name,
            **_cstr(c),
        )
        for c in _of(table).defaults
    ]


def check_constraints(table: Table) -> list[Any]:
    return [
        hms.SQLCheckConstraint(
            catName=CATALOG,
            table_db=table.db_name,
            table_name=table.table_name,
            column_name=c.column,
            check_expression=c.expression,
            dc_name=c.name,
            **_cstr(c),
        )
        for c in _of(table).checks
    ]
