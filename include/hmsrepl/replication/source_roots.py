"""Where a load may read the source's files: the roots of its own configuration, never those a dump declares.

Every location and file a dump names is tested against these (``dump_checks``, ``dump_validation``), and every
source file a load reads is opened through a file system bound to them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from hmsrepl.formats.paths import InvalidPathError, canonical_uri, is_below, show
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.storage.rooted import RootedFileSystem

SOURCE_WAREHOUSE_ENV = "HMSREPL_SOURCE_WAREHOUSE"
SOURCE_CMROOT_ENV = "HMSREPL_SOURCE_CMROOT"
SOURCE_EXTERNAL_ROOTS_ENV = "HMSREPL_SOURCE_EXTERNAL_ROOTS"


@dataclass(frozen=True)
class SourceRoots:
    """Where a load may read the source's files: from the load's own configuration, never from a dump."""

    warehouse: str
    cmroot: str
    external: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for what, root in (("source warehouse", self.warehouse), ("source cmroot", self.cmroot)):
            _canonical_root(what, root)
        for root in self.external:
            _canonical_root("source external root", root)

    @classmethod
    def from_settings(
        cls, warehouse: str | None, cmroot: str | None, external: str | Iterable[str] | None = None
    ) -> SourceRoots:
        """From option values; refuses, naming the missing settings, when the warehouse or cmroot is missing.

        There is no default: one relative to the working directory would make a load check a dump against
        roots the source never had (and refuse it with advice about external roots instead).
        """
        missing = [
            f"{env} ({option})"
            for value, env, option in (
                (warehouse, SOURCE_WAREHOUSE_ENV, "--source-warehouse"),
                (cmroot, SOURCE_CMROOT_ENV, "--source-cmroot"),
            )
            if not value
        ]
        if missing or warehouse is None or cmroot is None:
            raise DumpValidationError(
                f"the source roots are not configured: set {' and '.join(missing)}; REPL LOAD checks every "
                "path of a dump against the source's roots from its own configuration, never the dump's"
            )
        if isinstance(external, str) or external is None:
            external = [part.strip() for part in (external or "").split(",")]
        return cls(warehouse, cmroot, tuple(root for root in external if root))

    @classmethod
    def of_source(cls, warehouse: str, cmroot: str) -> SourceRoots:
        """The source metastore's own roots (its configuration), plus ``HMSREPL_SOURCE_EXTERNAL_ROOTS``."""
        return cls.from_settings(warehouse, cmroot, os.environ.get(SOURCE_EXTERNAL_ROOTS_ENV))

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> SourceRoots:
        env = os.environ if environ is None else environ
        return cls.from_settings(
            env.get(SOURCE_WAREHOUSE_ENV), env.get(SOURCE_CMROOT_ENV), env.get(SOURCE_EXTERNAL_ROOTS_ENV)
        )

    @cached_property
    def canonical_cmroot(self) -> str:
        return canonical_uri(self.cmroot)

    @cached_property
    def data_roots(self) -> tuple[str, ...]:
        """The canonical warehouse and external roots (computed once: every file is tested against them)."""
        return tuple(canonical_uri(root) for root in (self.warehouse, *self.external))

    @cached_property
    def files(self) -> RootedFileSystem:
        """The source's data roots as a rooted file system (symlinks resolved once per root)."""
        return RootedFileSystem(self.data_roots, purpose="source files of this load")

    @cached_property
    def readable(self) -> RootedFileSystem:
        """What a load may read: the source's data roots and its cmroot (copies of changed files)."""
        return RootedFileSystem(
            (*self.data_roots, self.canonical_cmroot), purpose="source files of this load"
        )

    def may_hold_data(self, canonical: str) -> bool:
        """A table's/partition's location or data file: below the warehouse or a configured external root."""
        return any(is_below(canonical, root) for root in self.data_roots)

    def describe(self) -> str:
        return ", ".join([self.warehouse, *self.external])


def _canonical_root(what: str, root: str) -> str:
    try:
        return canonical_uri(root)
    except InvalidPathError as exc:
        raise DumpValidationError(f"the configured {what} {show(root)} {exc}; fix the setting") from None
