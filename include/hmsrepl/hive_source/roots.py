"""The roots a stock Hive Metastore source may be read from: the operator's, never the source's own.

A dump of a stock metastore lists and checksums the files below every location the metastore names, and the
load copies what the dump lists from below the source roots. Were those roots the metastore's own answers
(``get_config_value`` for ``hive.metastore.warehouse.dir`` and ``hive.repl.cmrootdir``), a metastore that
answers a directory of its choosing (``/``, another service's data) would make the dump read any path it
names and the load copy it. So, as for an hmsrepl source, the operator names them (``--source-warehouse``,
``--source-cmroot``, ``--source-external-roots``; required), the metastore's answers are only checked
against them (an answer outside them is refused, never used to widen them), and every location whose files
the dump reads must lie below the warehouse or an external root.

Locations are compared in normalised form (``formats.paths``: ``.``/``..`` refused, never resolved).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats.paths import InvalidPathError, canonical_uri, is_below, show

WAREHOUSE_OPTION = "--source-warehouse (HMSREPL_SOURCE_WAREHOUSE)"
CMROOT_OPTION = "--source-cmroot (HMSREPL_SOURCE_CMROOT)"
EXTERNAL_OPTION = "--source-external-roots (HMSREPL_SOURCE_EXTERNAL_ROOTS)"


class StockRootsError(HmsReplError):
    """A stock source without the operator's roots, or one that answers or names paths outside them."""


@dataclass(frozen=True)
class StockRoots:
    """The operator's roots of one stock source (as given) and their normalised forms."""

    uri: str
    warehouse: str
    cmroot: str
    external: tuple[str, ...] = ()

    @classmethod
    def from_settings(
        cls,
        uri: str,
        warehouse: str | None,
        cmroot: str | None,
        external: str | Iterable[str] | None = None,
        *,
        need_cmroot: bool = True,
    ) -> StockRoots:
        """Refuses, naming the settings, when the warehouse or cmroot is missing or unusable (the cmroot may
        be left out with ``need_cmroot=False``: an import reads no recycled file)."""
        if not warehouse or (need_cmroot and not cmroot):
            raise StockRootsError(
                f"a stock metastore source ({uri}) is read only below roots from this configuration, never "
                f"from its own settings: set {WAREHOUSE_OPTION}"
                + (f" and {CMROOT_OPTION} to its warehouse and change manager root" if need_cmroot else "")
                + f", and {EXTERNAL_OPTION} for its external tables"
            )
        cmroot = cmroot or ""
        parts = external.split(",") if isinstance(external, str) else list(external or ())
        roots = cls(uri, warehouse, cmroot, tuple(part.strip() for part in parts if part.strip()))
        for what, root in roots._named():
            _canonical(what, root)
        return roots

    def _named(self) -> list[tuple[str, str]]:
        return [
            (WAREHOUSE_OPTION, self.warehouse),
            *([(CMROOT_OPTION, self.cmroot)] if self.cmroot else []),
            *((EXTERNAL_OPTION, root) for root in self.external),
        ]

    @cached_property
    def data_roots(self) -> list[str]:
        return [canonical_uri(root) for root in (self.warehouse, *self.external)]

    def check_reported(self, setting: str, value: str | None, *, cmroot: bool = False) -> None:
        """Refuse when the metastore says its warehouse (or cmroot) is outside the configured roots: it is
        then not the metastore they were configured for, or it tries to choose what is read."""
        if not value:
            return  # unset, or the metastore will not say: the configured roots stand
        allowed = [canonical_uri(self.cmroot)] if cmroot else self.data_roots
        try:
            reported = canonical_uri(value)
        except InvalidPathError as exc:
            raise StockRootsError(
                f"the metastore at {self.uri} reports {setting}={show(value)}, which {exc}; check that "
                "--source-db-url names the metastore meant"
            ) from None
        if not any(is_below(reported, root) for root in allowed):
            option = CMROOT_OPTION if cmroot else f"{WAREHOUSE_OPTION} or {EXTERNAL_OPTION}"
            raise StockRootsError(
                f"the metastore at {self.uri} reports {setting}={show(value)}, outside the roots configured "
                f"for it ({', '.join(show(r) for r in allowed)}); it is not read. If it is the metastore "
                f"meant, set {option} to include that directory"
            )

    def check_location(self, what: str, location: str) -> None:
        """Refuse to read files of a location outside the warehouse and external roots."""
        try:
            canonical = canonical_uri(location)
        except InvalidPathError as exc:
            raise StockRootsError(f"{what}: location {show(location)} {exc}; it is not read") from None
        if not any(is_below(canonical, root) for root in self.data_roots):
            raise StockRootsError(
                f"{what}: location {show(location)} is outside the source roots configured for "
                f"{self.uri} ({', '.join(show(r) for r in self.data_roots)}); it is not read. Add its root "
                f"to {EXTERNAL_OPTION} if it is trusted"
            )


def require_copy_roots(uri: str, roots: StockRoots | None) -> StockRoots:
    """The operator's roots of the stock metastore at ``uri`` for an import that copies its files: required,
    never the metastore's own answers (a copy would otherwise read whatever location it names)."""
    if roots is None:
        raise StockRootsError(
            f"copying files from the stock metastore at {uri} reads them only below roots from this "
            f"configuration, never below locations it chooses: set {WAREHOUSE_OPTION} to its warehouse, "
            f"and {EXTERNAL_OPTION} for the other directories its managed tables use"
        )
    return roots


def _canonical(what: str, root: str) -> str:
    try:
        return canonical_uri(root)
    except InvalidPathError as exc:
        raise StockRootsError(f"{what}: root {show(root)} {exc}") from None
