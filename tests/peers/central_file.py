"""One pinned file from Maven Central (a server tarball, an executable jar), checked against Central's SHA-1.

``tests.peers.maven`` resolves jar sets through Maven; a distribution archive is not a dependency Maven copies,
so it is downloaded as is. The download goes to a ``.part`` file while its SHA-1 is computed, is compared with
the ``.sha1`` Central publishes next to it, and only then takes its final name: a file under its final name
is always a verified one, and a second fetch is a no-op.
"""

from __future__ import annotations

import hashlib
import urllib.request
from pathlib import Path

from tests.peers.maven import FetchError

CENTRAL_URL = "https://repo.maven.apache.org/maven2"


def artifact_url(group: str, artifact: str, version: str, suffix: str) -> str:
    """Central's URL of ``artifact-version<suffix>`` (``suffix`` such as ``.tar.gz`` or ``-executable.jar``)."""
    return f"{CENTRAL_URL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}{suffix}"


def published_sha1(url: str) -> str:
    """The SHA-1 Central publishes for ``url`` (its ``.sha1`` file holds the hex digest, maybe a name after it)."""
    try:
        with urllib.request.urlopen(url + ".sha1", timeout=60) as reply:
            return reply.read().decode().split()[0].strip().lower()
    except OSError as error:
        raise FetchError(f"{url}.sha1: {error}") from error


def fetch_file(url: str, dest: Path) -> Path:
    """``dest``, downloaded from ``url`` unless already there, and equal to Central's SHA-1 (raise otherwise)."""
    if dest.exists():
        return dest
    expected = published_sha1(url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.sha1()  # Maven Central publishes SHA-1 sums: a check, not a secret
    try:
        with urllib.request.urlopen(url, timeout=60) as reply, part.open("wb") as out:
            for block in iter(lambda: reply.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
    except OSError as error:
        part.unlink(missing_ok=True)
        raise FetchError(f"{url}: {error}") from error
    if digest.hexdigest() != expected:
        part.unlink()
        raise FetchError(f"{url}: SHA-1 differs from Maven Central's; fetch again")
    part.rename(dest)
    return dest
