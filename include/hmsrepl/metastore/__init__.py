"""The HMS-compatible metastore: catalog, notification log, transactions and change manager."""

from hmsrepl.metastore.service import Metastore

__all__ = ["Metastore"]
