"""The S3A jars match pyspark's Hadoop, and no fetched jar differs from the SHA-1 Maven Central published."""

from __future__ import annotations

import hashlib
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyspark
import pytest

from tests.peers import maven, s3a


def test_hadoop_aws_is_the_version_of_pysparks_hadoop_client() -> None:
    """hadoop-aws must match hadoop-client-api exactly: S3A uses Hadoop internals that change between releases."""
    jars = Path(pyspark.__file__).parent / "jars"
    [client] = [p.name for p in jars.glob("hadoop-client-api-*.jar")]
    assert client == f"hadoop-client-api-{s3a.HADOOP_VERSION}.jar"
    assert f"org.apache.hadoop:hadoop-aws:{s3a.HADOOP_VERSION}" in s3a.JARS.artifacts


@pytest.mark.parametrize("jar_set", [s3a.JARS, s3a.BUNDLE], ids=lambda s: s.name)
def test_the_pom_pins_the_listed_artifacts_with_the_sets_exclusions(jar_set: maven.JarSet) -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = ET.fromstring(maven.pom(jar_set)).findall("m:dependencies/m:dependency", ns)
    coordinates = [
        ":".join(d.find(f"m:{k}", ns).text for k in ("groupId", "artifactId", "version")) for d in deps
    ]  # type: ignore[union-attr]
    assert coordinates == list(jar_set.artifacts)
    for dep in deps:
        excluded = [
            f"{e.find('m:groupId', ns).text}:{e.find('m:artifactId', ns).text}"  # type: ignore[union-attr]
            for e in dep.findall("m:exclusions/m:exclusion", ns)
        ]
        assert excluded == list(jar_set.exclusions)


def _artifact(jar: str) -> str:
    """``netty-codec-4.2.13.Final.jar`` -> ``netty-codec``: the name without its version."""
    return re.split(r"-\d", jar, maxsplit=1)[0]


def test_the_sdk_modules_add_no_second_copy_of_a_library_pyspark_ships() -> None:
    if not s3a.JARS.is_cached():
        pytest.skip("the S3A jars are not fetched: python -m tests.peers.s3a")
    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    fetched = {_artifact(p.name) for p in s3a.JARS.jars().glob("*.jar")}
    assert "hadoop-aws" in fetched and "s3" in fetched
    assert fetched & shipped == set()


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
    maven.verify(*_layout(tmp_path, b"content", b"content"))


def test_a_jar_that_differs_from_its_published_sha1_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(maven.FetchError, match=r"thing-1\.0\.jar: SHA-1 differs"):
        maven.verify(*_layout(tmp_path, b"content", b"tampered"))


def test_a_jar_without_a_published_sha1_is_refused(tmp_path: Path) -> None:
    jars, m2 = _layout(tmp_path, b"content", b"content")
    (jars / "stray.jar").write_bytes(b"x")
    with pytest.raises(maven.FetchError, match=r"stray\.jar: no \.sha1"):
        maven.verify(jars, m2)


def test_a_changed_pin_fetches_into_another_directory() -> None:
    changed = maven.JarSet(s3a.JARS.name, (*s3a.JARS.artifacts[:-1], "org.example:other:1"))
    assert changed.cache_dir() != s3a.JARS.cache_dir()
    assert s3a.JARS.cache_dir().parent == maven.PEERS
