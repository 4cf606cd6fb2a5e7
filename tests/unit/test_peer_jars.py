"""The Hive 3.1 client is fetched as Spark resolves it: the pinned artifacts, each with Spark's exclusions.

(The SHA-1 checks every fetched jar passes are ``tests.peers.maven``'s, tested in ``test_s3a_jars.py``.)
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tests.peers import hive31
from tests.peers.maven import pom


def test_the_pom_pins_every_artifact_with_sparks_exclusions() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = ET.fromstring(pom(hive31.CLIENT)).findall("m:dependencies/m:dependency", ns)
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


def test_the_client_set_resolves_transitively_into_its_own_cache() -> None:
    assert hive31.CLIENT.transitive  # Maven resolves the closure, as Spark's ivy route does
    assert hive31.CLIENT.jars().is_relative_to(hive31.CLIENT.cache_dir())
    assert hive31.CLIENT.cache_dir().name.startswith("hive-3.1.3-client-")
