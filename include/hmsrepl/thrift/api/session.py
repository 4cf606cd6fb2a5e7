"""Session and server settings: names, versions, set_ugi, the settings clients may read, catalogs."""

from __future__ import annotations

import json
from typing import Any

from hmsrepl import __version__
from hmsrepl.exceptions import AccessDeniedError, InvalidObjectError, NoSuchObjectError
from hmsrepl.thrift.api.base import Area
from hmsrepl.thrift.catalogs import CATALOG
from hmsrepl.thrift.idl import hms

CACHE_METRICS_KEY = "hmsrepl.cache.metrics"


class SessionApi(Area):
    """Who the connection is and what the server tells about itself."""

    def getName(self) -> str:
        return "hmsrepl metastore"

    def getVersion(self) -> str:
        return __version__

    def shutdown(self) -> None:
        """Clients send this one-way call when they close; the server itself keeps running."""

    def set_ugi(self, user_name: str, group_names: list[str] | None) -> list[str]:
        peer = self.peer
        if peer is not None and peer.authenticated and user_name:
            if self.security is None or not self.security.may_impersonate(peer, user_name):
                raise AccessDeniedError(
                    f"set_ugi: principal {peer.principal} (user '{peer.user}') may not act as '{user_name}'; "
                    f"connect with {user_name}'s own credentials, or allow it in HMSREPL_PROXY_USERS"
                )
            self._local.user = user_name
        elif peer is None or not peer.authenticated:
            self._local.user = user_name or ""
        return list(group_names or [])

    def _exposed_settings(self) -> dict[str, str]:
        """The server settings clients may read, under Hive's names."""
        return {
            "hive.metastore.warehouse.dir": self.store.config.warehouse,
            "hive.repl.cmrootdir": self.store.config.cmroot,
            "hive.metastore.dml.events": "true",
        }

    def getMetaConf(self, key: str) -> str:
        if key == CACHE_METRICS_KEY:  # runtime state rather than a setting, but the one call every client has
            return json.dumps(self.cache_metrics(), sort_keys=True)
        values = self._exposed_settings()
        if key not in values:
            raise InvalidObjectError(f"getMetaConf: '{key}' is not a metastore setting this server exposes")
        return values[key]

    def get_config_value(self, name: str, default_value: str) -> str:
        """The server's value where it has one (Hive 3 clients ask for the warehouse), else the default."""
        return self._exposed_settings().get(name, default_value)

    def cache_metrics(self) -> dict[str, Any]:
        """The cache's hits, misses by reason and lag in events (``{"enabled": false}`` without a cache)."""
        if self.cache is None:
            return {"enabled": False}
        return {"enabled": True, **self.cache.metrics()}

    def get_catalog(self, catName: Any) -> Any:
        if (catName.name or "").lower() != CATALOG:
            raise NoSuchObjectError(
                f"catalog '{catName.name}' does not exist; this metastore has only '{CATALOG}'"
            )
        catalog = hms.Catalog(
            name=CATALOG, description="Hive's default catalog", locationUri=self.store.config.warehouse
        )
        return hms.GetCatalogResponse(catalog=catalog)

    def get_catalogs(self) -> Any:
        return hms.GetCatalogsResponse(names=[CATALOG])
