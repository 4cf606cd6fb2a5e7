"""The Hive 3.1 client fetch trusts no jar whose SHA-1 differs from the one Maven Central published."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.peers import hive31


def _layout(tmp_path: Path, published: bytes, copied: bytes) -> tuple[Path, Path]:
    m2, jars = tmp_path / "m2", tmp_path / "jars"
    stored = m2 / "org" / "example" / "thing" / "1.0"
    stored.mkdir(parents=True)
    jars.mkdir()
    (stored / "thing-1.0.jar").write_bytes(published)
    (stored / "thing-1.0.jar.sha1").write_text(hashlib.sha1(published).hexdigest() + "  thing-1.0.jar\n")
    (jars / "thing-1.0.jar").write_bytes(copied)
    return jars, m2


def test_a_jar_equal_to_its_published_sha1_passes(tmp_path: Path) -> None:
    jars, m2 = _layout(tmp_path, b"content", b"content")
    hive31.verify(jars, m2)


def test_a_jar_that_differs_from_its_published_sha1_is_refused_by_name(tmp_path: Path) -> None:
    jars, m2 = _layout(tmp_path, b"content", b"tampered")
    with pytest.raises(hive31.FetchError, match=r"thing-1\.0\.jar: SHA-1 differs"):
        hive31.verify(jars, m2)


def test_a_jar_without_a_published_sha1_is_refused(tmp_path: Path) -> None:
    jars, m2 = _layout(tmp_path, b"content", b"content")
    (jars / "stray.jar").write_bytes(b"x")
    with pytest.raises(hive31.FetchError, match=r"stray\.jar: no \.sha1"):
        hive31.verify(jars, m2)


def test_the_pom_pins_every_artifact_with_sparks_exclusions() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = ET.fromstring(hive31.pom()).findall("m:dependencies/m:dependency", ns)
    coordinates = [
        ":".join(d.find(f"m:{k}", ns).text for k in ("groupId", "artifactId", "version")) for d in deps
    ]
    assert coordinates == list(hive31.ARTIFACTS)
    for dep in deps:
        excluded = {
            f"{e.find('m:groupId', ns).text}:{e.find('m:artifactId', ns).text}"
            for e in dep.findall("m:exclusions/m:exclusion", ns)
        }
        assert excluded == set(hive31.EXCLUSIONS)
