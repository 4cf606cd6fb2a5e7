"""Staged copies: a file written under a hidden name next to its final place, then renamed into place.

Hive and Spark skip names starting with '.', so a copy under ``.hmsrepl-staging-<name>`` is invisible to
readers until its rename, and the rename makes the whole file appear at once. Loads stage every copy this
way; the metastore's file intents (``metastore.intents``) finish a staged copy whose publication a committed
load still owes, which is why the naming lives here, below both.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from hmsrepl.storage.base import filesystem_for
from hmsrepl.storage.local import is_local_uri, local_path, sync_file_systems
from hmsrepl.storage.rooted import RootedFileSystem

log = logging.getLogger(__name__)

STAGING_PREFIX = ".hmsrepl-staging-"


def staging_name(final_uri: str) -> str:
    """Where the copy of ``final_uri`` waits, hidden, until it is published (same directory)."""
    parent, _, name = final_uri.rstrip("/").rpartition("/")
    return f"{parent}/{STAGING_PREFIX}{name}"


def publish(fs: RootedFileSystem, target_uri: str) -> None:
    """Rename a verified staged copy into place (replacing an older file of the same name); both names must
    lie in ``fs``'s roots (else ``OutsideRootsError``, nothing renamed).

    The rename is not synced: ``publish_owed`` and the loads' batch sync make renames durable.
    """
    staged = staging_name(target_uri)
    fs.check(staged, follow=False)
    fs.check(target_uri, follow=False)
    if is_local_uri(target_uri):
        os.replace(local_path(staged), local_path(target_uri))
        return
    # An object store replaces a key whole, HDFS renames over the file: a reader sees the older file or the
    # new one, never neither (a publish run again after a crash may find the file already in place).
    filesystem_for(target_uri).replace(staged, target_uri)


def publish_owed(files: RootedFileSystem, target_uris: Sequence[str]) -> None:
    """Publish staged copies a committed change names, idempotently, and make the renames durable.

    Run after the commit, and again after a crash: a copy already in place (no staged name left) is done; a
    copy with neither name left belongs to an object removed since, and is only reported (``repl verify``
    names a file its replica records but lacks).
    """
    for uri in target_uris:
        staged = staging_name(uri)
        if files.exists(staged):
            publish(files, uri)
        elif not files.exists(uri):
            log.warning("'%s' was to be published but neither it nor its staged copy is there", uri)
    sync_parents(target_uris)


def sync_parents(uris: Sequence[str]) -> None:
    """Make renames into the local directories holding ``uris`` durable: one ``syncfs`` per file system."""
    sync_file_systems(local_path(uri).rsplit("/", 1)[0] or "/" for uri in uris if is_local_uri(uri))
