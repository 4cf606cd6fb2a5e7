"""The Trino server, fetched from Maven Central, checksum-verified and unpacked under ``var/peers/``.

    python -m tests.peers.trino            # fetch (a no-op when the cache is complete), print the server directory

``io.trino:trino-server`` is an ~820 MB tarball with some fifty connectors; only the Hive and Iceberg
connectors talk to a Hive metastore, so the others are deleted once unpacked, which keeps the cache and the
server's start-up small. The tarball is deleted once unpacked: the ``complete`` marker records its SHA-1.
Trino 476 needs Java 24 or later (``JAVA_HOME`` below); starting and stopping it is ``tests.peers.trino_server``'s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.peers.central_file import artifact_url, fetch_file
from tests.peers.maven import PEERS, FetchError, central_reachable

TRINO_VERSION = "476"
PLUGINS = ("hive", "iceberg")
SERVER_URL = artifact_url("io.trino", "trino-server", TRINO_VERSION, ".tar.gz")
SERVER_DIR = PEERS / f"trino-server-{TRINO_VERSION}"
JAVA_HOMES = ("/usr/lib/jvm/temurin-25-jdk-amd64",)

__all__ = ["TRINO_VERSION", "FetchError", "central_reachable", "fetch", "is_cached", "java_home"]


def is_cached() -> bool:
    """Whether a previous fetch completed (then no network is needed)."""
    return (SERVER_DIR / "complete").exists()


def java_home() -> Path:
    """A JDK new enough for Trino: ``HMSREPL_TRINO_JAVA_HOME`` if set, else the Temurin 25 install."""
    candidates = [os.environ.get("HMSREPL_TRINO_JAVA_HOME", ""), *JAVA_HOMES]
    for home in filter(None, candidates):
        if (Path(home) / "bin" / "java").exists():
            return Path(home)
    raise FetchError(
        f"Trino {TRINO_VERSION} needs Java 24 or later: install it or set HMSREPL_TRINO_JAVA_HOME to its home"
    )


def fetch() -> Path:
    """The unpacked server (``lib/`` and the Hive and Iceberg plugins), fetching it first unless cached."""
    if is_cached():
        return SERVER_DIR
    tarball = fetch_file(SERVER_URL, PEERS / "downloads" / f"trino-server-{TRINO_VERSION}.tar.gz")
    staging = SERVER_DIR.with_name(SERVER_DIR.name + ".unpacking")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    run = subprocess.run(  # whole: the plugins' jars are hard links into one another's directories
        ["tar", "xzf", str(tarball), "-C", str(staging), "--strip-components=1"],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise FetchError(f"{tarball.name} did not unpack: {run.stderr.strip()[-300:]}")
    for plugin in (staging / "plugin").iterdir():
        if plugin.name not in PLUGINS:
            shutil.rmtree(plugin)
    shutil.rmtree(SERVER_DIR, ignore_errors=True)
    staging.rename(SERVER_DIR)
    summary = {"url": SERVER_URL, "plugins": PLUGINS, "bytes": tarball.stat().st_size}
    (SERVER_DIR / "complete").write_text(json.dumps(summary) + "\n")
    tarball.unlink()
    return SERVER_DIR


def main() -> int:
    """Fetch the server and print its directory (one line on stdout; a summary or the error on stderr)."""
    started = time.monotonic()
    cached = is_cached()
    try:
        server = fetch()
    except FetchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    verb = "cached" if cached else "fetched and unpacked"
    print(f"{verb} Trino {TRINO_VERSION} in {time.monotonic() - started:.1f} s: {server}", file=sys.stderr)
    print(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
