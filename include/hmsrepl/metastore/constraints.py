"""A table's constraints (Hive 3+: primary and foreign keys, unique, not null, default and check), kept in the
table's own document.

Why in the document and not in tables of their own: the document is what CREATE_TABLE and ALTER_TABLE
events snapshot and what a bootstrap dump writes, so constraints replicate with their table, with no new
event type, and ``repl verify`` compares them with the rest of the table. Names inside are relative: a
constraint names its columns, never its own database or table, so a replica (another database name) or a
renamed table answers with its own names. A foreign key names its parent's database only when it is another
database than the table's own.

Hive's rules kept here: the columns a constraint names exist in the table, and a constraint's name is unique
in its database (``ObjectStore.addPrimaryKeys`` and friends). ``None`` (the table's field) means "never had
any": a client's alter, which sends no constraints, keeps those stored.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from hmsrepl.exceptions import InvalidObjectError, NoSuchObjectError


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Constraint(_Model):
    """What every constraint has: a name unique in its database, and Hive's three flags."""

    name: str
    enable: bool = False
    validated: bool = False
    rely: bool = False

    def column_names(self) -> list[str]:
        raise NotImplementedError


class PrimaryKey(Constraint):
    columns: list[str]

    def column_names(self) -> list[str]:
        return list(self.columns)


class UniqueConstraint(PrimaryKey):
    """Same shape as a primary key: an ordered list of columns."""


class ForeignKey(Constraint):
    columns: list[str]
    parent_db: str | None = Field(default=None, description="None: the table's own database.")
    parent_table: str
    parent_columns: list[str]
    parent_key: str | None = None
    update_rule: int = 0
    delete_rule: int = 0

    def column_names(self) -> list[str]:
        return list(self.columns)


class NotNullConstraint(Constraint):
    column: str

    def column_names(self) -> list[str]:
        return [self.column]


class DefaultConstraint(NotNullConstraint):
    value: str | None = None


class CheckConstraint(Constraint):
    column: str | None = None
    expression: str

    def column_names(self) -> list[str]:
        return [self.column] if self.column else []


class TableConstraints(_Model):
    primary_key: PrimaryKey | None = None
    foreign_keys: list[ForeignKey] = Field(default_factory=list)
    unique: list[UniqueConstraint] = Field(default_factory=list)
    not_null: list[NotNullConstraint] = Field(default_factory=list)
    defaults: list[DefaultConstraint] = Field(default_factory=list)
    checks: list[CheckConstraint] = Field(default_factory=list)

    def all(self) -> list[Constraint]:
        head: list[Constraint] = [self.primary_key] if self.primary_key else []
        return [*head, *self.foreign_keys, *self.unique, *self.not_null, *self.defaults, *self.checks]

    def names(self) -> set[str]:
        return {c.name for c in self.all()}

    def is_empty(self) -> bool:
        return not self.all()

    def merged(self, added: TableConstraints) -> TableConstraints:
        """These and ``added`` (a table has one primary key: a second one is refused)."""
        if self.primary_key and added.primary_key:
            raise InvalidObjectError(
                f"the table already has primary key '{self.primary_key.name}'; drop it before adding "
                f"'{added.primary_key.name}'"
            )
        return TableConstraints(
            primary_key=self.primary_key or added.primary_key,
            foreign_keys=[*self.foreign_keys, *added.foreign_keys],
            unique=[*self.unique, *added.unique],
            not_null=[*self.not_null, *added.not_null],
            defaults=[*self.defaults, *added.defaults],
            checks=[*self.checks, *added.checks],
        )

    def following(
        self, own_db: str, parent: tuple[str, str], renamed_to: tuple[str, str] | None
    ) -> TableConstraints | None:
        """These with each foreign key whose parent is ``parent`` (database, table) following it: naming
        ``renamed_to``, or gone when that is None (the parent was dropped); None when no key names it.

        Hive's foreign keys point at their parent's row, so a rename carries them along and a drop deletes
        them with it (``ObjectStore.dropTable`` removes every constraint whose parent or child it is)."""
        keys: list[ForeignKey] = []
        changed = False
        for key in self.foreign_keys:
            if (key.parent_db or own_db, key.parent_table) != parent:
                keys.append(key)
                continue
            changed = True
            if renamed_to is not None:
                new_db, new_table = renamed_to
                keys.append(
                    key.model_copy(
                        update={"parent_db": None if new_db == own_db else new_db, "parent_table": new_table}
                    )
                )
        return self.model_copy(update={"foreign_keys": keys}) if changed else None

    def without(self, name: str, table: str) -> TableConstraints:
        """These without constraint ``name``; NoSuchObject (as Hive) if the table has none of that name."""
        name = name.lower()
        if name not in self.names():
            raise NoSuchObjectError(f"the constraint '{name}' does not exist for table '{table}'")
        return TableConstraints(
            primary_key=None if self.primary_key and self.primary_key.name == name else self.primary_key,
            foreign_keys=[c for c in self.foreign_keys if c.name != name],
            unique=[c for c in self.unique if c.name != name],
            not_null=[c for c in self.not_null if c.name != name],
            defaults=[c for c in self.defaults if c.name != name],
            checks=[c for c in self.checks if c.name != name],
        )


def check_columns(constraints: TableConstraints, columns: Iterable[str], table: str) -> None:
    """Each constraint names columns of the table (Hive: InvalidObjectException), and no name twice."""
    known = {c.lower() for c in columns}
    seen: set[str] = set()
    for constraint in constraints.all():
        if constraint.name in seen:
            raise InvalidObjectError(
                f"constraint name '{constraint.name}' is given twice for table '{table}'; use distinct names"
            )
        seen.add(constraint.name)
        for column in constraint.column_names():
            if column not in known:
                raise InvalidObjectError(
                    f"constraint '{constraint.name}': column '{column}' is not a column of table '{table}'"
                )


def check_names_free(added: TableConstraints, taken: set[str], db_name: str) -> None:
    """Constraint names are unique within a database (Hive: InvalidObjectException)."""
    for name in sorted(added.names() & taken):
        raise InvalidObjectError(
            f"constraint name '{name}' already exists in database '{db_name}'; choose another name"
        )
