"""Stock Hive Metastores 3.1 and 4.x with Hive's own ``DbNotificationListener``, fetched from Maven Central.

    python -m tests.peers.hive_metastore            # fetch both (no-ops when cached), print their directories

Each runs on Derby, started by ``bench.hive_reference.HiveReferenceMetastore`` with the jars, the Java and a
Derby template given here, and keeps its notification log through hcatalog's
``org.apache.hive.hcatalog.listener.DbNotificationListener`` (``hive-hcatalog-server-extensions``) as a
transactional event listener, each with the message factory its release defaults to:

- **3.1.3**: the standalone metastore's binary distribution (``hive-standalone-metastore-3.1.3-bin.tar.gz``:
  its ``lib/`` and its Derby scripts), Hadoop 3.1.0 (what Hive 3.1.3 builds with) and the 3.1.3 listener;
  messages ``json-0.2``; Java 17.
- **4.2.0**: the listener of Hive 4.0.x is not on Central (``hive-hcatalog-server-extensions`` 4.0.0 and
  4.0.1 answer 404; the 4.0.1 standalone metastore has no listener of its own), so the Hive 4 peer is 4.2.0,
  the first 4.x release whose listener is published. Its metastore server is inside ``hive-exec-4.2.0.jar``
  (shaded in, with DataNucleus's JDO API and HikariCP); the listener's ``hive-hcatalog-core`` 4.2.0 is not
  published either, and the one class it takes from it (``hcatalog.data.Pair``) comes from 4.0.1. Hadoop
  3.5.0, since 3.4's ``UserGroupInformation`` fails on Java 23+ (``Subject.getSubject``), and 4.2.0 is built
  for Java 21, so it runs on the Temurin 25 JDK. Messages ``gzip(json-2.0)``.

Hive 3 and later need tables DataNucleus does not create (transactions, locks), so the schema comes from
Hive's ``schematool`` with the release's Derby scripts; for 4.2.0 the 4.0.0 scripts of the 4.0.1 distribution
(4.2.0's are not published), ``-initSchemaTo 4.0.0``, and DataNucleus adds what 4.1 and 4.2 added (a catalog
parameters table). Running ``schematool`` takes ~15 s, so it runs once per cache: its database is kept under
``var/peers`` as a template that each metastore copies.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.hive_reference import HiveReferenceMetastore, hive_site_xml
from tests.peers import maven
from tests.peers.central_file import artifact_url, fetch_file
from tests.peers.maven import PEERS, FetchError, JarSet

LISTENER_CLASS = "org.apache.hive.hcatalog.listener.DbNotificationListener"
JAVA_25_HOMES = ("/usr/lib/jvm/temurin-25-jdk-amd64",)
SCHEMA_TIMEOUT = 600.0
#: A test metastore lives a minute and answers a few hundred calls: the quick compiler alone and the serial
#: collector halve its start on 2 shared cores (3.1.3: 16 s to 7 s, 4.2.0: 17 s to 11 s, measured loaded).
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

#: Settings every stock source here runs with (besides ``hive_reference.hive_site_xml``'s Derby ones). This
#: module imports nothing of the product at its top: set-up fetches the releases with the system's Python
#: while the virtual environment is still being installed (``tests.peers.fetch_all``).
SOURCE_SETTINGS = {
    "hive.metastore.transactional.event.listeners": LISTENER_CLASS,
    # Hive 3+ refuses the notification reads to any user but a proxy superuser unless this is off.
    "hive.metastore.event.db.notification.api.auth": "false",
    # What the standalone distributions' own metastore-site.xml sets: no Hive query engine on the classpath.
    "metastore.expression.proxy": "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy",
    "metastore.task.threads.always": "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
}


def source_settings() -> dict[str, str]:
    """``SOURCE_SETTINGS`` and the setting the product asks of a Hive 4 source: Hive 4 logs one
    ALTER_PARTITIONS per alter_partitions call unless it is off; hmsrepl replays one partition per event and
    refuses a batch (``hive_source.messages``), as its docs tell operators to set."""
    from hmsrepl.hive_source.messages import BATCH_ALTER_SETTING

    return {**SOURCE_SETTINGS, BATCH_ALTER_SETTING: "false"}


_NO_TRANSITIVE = ("*:*",)
_NOT_FROM_HADOOP = ("jdk.tools:jdk.tools", "org.slf4j:slf4j-reload4j", "ch.qos.reload4j:reload4j")


@dataclass(frozen=True)
class Tarball:
    """A binary distribution on Central and the members of it that are kept (all when ``keep`` is empty)."""

    group: str
    artifact: str
    version: str
    keep: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return artifact_url(self.group, self.artifact, self.version, "-bin.tar.gz")


@dataclass(frozen=True)
class HiveRelease:
    """One stock metastore: what to fetch, how to create its schema, which Java runs it."""

    version: str
    message_format: str
    distribution: Tarball
    jar_sets: tuple[JarSet, ...]
    lib_from_distribution: bool
    schema_tool: str
    schema_args: tuple[str, ...]
    java_homes: tuple[str, ...] = ()
    extra_settings: tuple[tuple[str, str], ...] = ()

    @property
    def home(self) -> Path:
        """The unpacked distribution (its ``scripts/`` and, for 3.1, its ``lib/``)."""
        return PEERS / f"hive-metastore-{self.version}"

    @property
    def derby_template(self) -> Path:
        return PEERS / f"hive-metastore-{self.version}-derby" / "metastore_db"


HIVE_31 = HiveRelease(
    version="3.1.3",
    message_format="json-0.2",
    distribution=Tarball("org.apache.hive", "hive-standalone-metastore", "3.1.3"),
    jar_sets=(
        JarSet(
            "hive-3.1.3-metastore-hadoop",
            (
                "org.apache.hadoop:hadoop-common:3.1.0",
                "org.apache.hive.hcatalog:hive-hcatalog-server-extensions:3.1.3",
            ),
            transitive=True,
            exclusions=(*_NOT_FROM_HADOOP, "org.apache.hive:*", "org.apache.hive.hcatalog:*", "log4j:log4j"),
        ),
    ),
    lib_from_distribution=True,
    schema_tool="org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool",
    schema_args=("-initSchema", "-dbType", "derby"),
)

HIVE_4 = HiveRelease(
    version="4.2.0",
    message_format="gzip(json-2.0)",
    distribution=Tarball(
        "org.apache.hive",
        "hive-standalone-metastore-server",
        "4.0.1",
        keep=("scripts/metastore/upgrade/derby/",),
    ),
    jar_sets=(
        JarSet(
            "hive-4.2.0-metastore",
            (
                "org.apache.hive:hive-exec:4.2.0",
                "org.apache.hive.hcatalog:hive-hcatalog-server-extensions:4.2.0",
                "org.apache.hive.hcatalog:hive-hcatalog-core:4.0.1",
                "org.apache.derby:derby:10.17.1.0",
                "org.apache.derby:derbyshared:10.17.1.0",
                "org.apache.derby:derbytools:10.17.1.0",
                "org.datanucleus:datanucleus-core:6.0.10",
                "org.datanucleus:datanucleus-api-jdo:6.0.3",
                "org.datanucleus:datanucleus-rdbms:6.0.10",
                "org.datanucleus:javax.jdo:3.2.0-release",
            ),
            exclusions=_NO_TRANSITIVE,
        ),
        JarSet(
            "hive-4.2.0-metastore-hadoop",
            (
                "org.apache.hadoop:hadoop-common:3.5.0",
                "org.apache.hadoop:hadoop-hdfs-client:3.5.0",
                "org.apache.hadoop:hadoop-hdfs:3.5.0",
                "org.apache.hadoop:hadoop-mapreduce-client-core:3.5.0",
                "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
                "org.apache.logging.log4j:log4j-core:2.24.3",
                "org.apache.commons:commons-dbcp2:2.12.0",
                "commons-collections:commons-collections:3.2.2",
                "com.github.ben-manes.caffeine:caffeine:2.8.4",
                "org.apache.commons:commons-jexl3:3.3",
                "com.cronutils:cron-utils:9.2.1",
                "org.springframework:spring-jdbc:5.3.39",
                "sqlline:sqlline:1.9.0",
            ),
            transitive=True,
            exclusions=_NOT_FROM_HADOOP,
        ),
    ),
    lib_from_distribution=False,
    schema_tool="org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool",
    schema_args=("-initSchemaTo", "4.0.0", "-dbType", "derby"),
    java_homes=JAVA_25_HOMES,
    # The pool bundled in hive-exec; the 4.0.0 schema lacks 4.2's catalog parameters table.
    extra_settings=(("datanucleus.connectionPoolingType", "HikariCP"),),
)

RELEASES = {release.version: release for release in (HIVE_31, HIVE_4)}

__all__ = ["HIVE_4", "HIVE_31", "RELEASES", "FetchError", "HiveRelease", "fetch", "is_cached", "running"]


def java(release: HiveRelease) -> str:
    """The ``java`` that runs ``release`` (``HMSREPL_HIVE4_JAVA_HOME`` overrides the Temurin 25 default)."""
    if not release.java_homes:
        return "java"
    for home in filter(None, [os.environ.get("HMSREPL_HIVE4_JAVA_HOME", ""), *release.java_homes]):
        if (Path(home) / "bin" / "java").exists():
            return str(Path(home) / "bin" / "java")
    raise FetchError(
        f"Hive {release.version} needs Java 21 or later: install it or set HMSREPL_HIVE4_JAVA_HOME to its home"
    )


def is_cached(release: HiveRelease) -> bool:
    """Whether every part is fetched and the schema template exists (then no network is needed)."""
    return (
        (release.home / "complete").exists()
        and all(jar_set.is_cached() for jar_set in release.jar_sets)
        and (release.derby_template.parent / "complete").exists()
    )


def _unpack(release: HiveRelease) -> Path:
    """The distribution's kept members under ``release.home`` (downloaded, SHA-1 checked, then deleted)."""
    if (release.home / "complete").exists():
        return release.home
    dist = release.distribution
    tarball = fetch_file(dist.url, PEERS / "downloads" / dist.url.rsplit("/", 1)[1])
    staging = release.home.with_name(release.home.name + ".unpacking")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        members = []
        for member in archive.getmembers():
            inner = member.name.split("/", 1)[1] if "/" in member.name else ""
            if inner and (not dist.keep or inner.startswith(dist.keep)):
                member.name = inner
                members.append(member)
        archive.extractall(staging, members=members, filter="data")
    shutil.rmtree(release.home, ignore_errors=True)
    staging.rename(release.home)
    (release.home / "complete").write_text(dist.url + "\n")
    tarball.unlink()
    return release.home


def classpath(release: HiveRelease) -> tuple[str, ...]:
    """The metastore's jars (fetched first unless cached), as classpath wildcards."""
    home = _unpack(release)
    jars = [f"{home / 'lib'}/*"] if release.lib_from_distribution else []
    return (*jars, *(f"{maven.fetch(jar_set).jars}/*" for jar_set in release.jar_sets))


def derby_template(release: HiveRelease) -> Path:
    """A Derby database whose schema the release's ``schematool`` created (created once per cache)."""
    done = release.derby_template.parent / "complete"
    if done.exists():
        return release.derby_template
    jars = classpath(release)
    work = release.derby_template.parent.with_name(release.derby_template.parent.name + ".creating")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={work / 'metastore_db'};create=true"
    }
    (work / "hive-site.xml").write_text(hive_site_xml(work, settings))
    command = [
        java(release),
        "-cp",
        os.pathsep.join([str(work), *jars]),
        release.schema_tool,
        *release.schema_args,
    ]
    env = {
        **os.environ,
        "METASTORE_HOME": str(release.home),
    }  # where schematool finds scripts/metastore/upgrade
    run = subprocess.run(
        command, cwd=work, env=env, capture_output=True, text=True, timeout=SCHEMA_TIMEOUT, check=False
    )
    if run.returncode != 0 or "completed" not in run.stdout + run.stderr:
        tail = (run.stdout + run.stderr)[-3000:]
        raise FetchError(f"Hive {release.version}'s schematool failed (exit {run.returncode}):\n{tail}")
    shutil.rmtree(release.derby_template.parent, ignore_errors=True)
    work.rename(release.derby_template.parent)
    done.write_text(f"{release.schema_tool} {' '.join(release.schema_args)}\n")
    return release.derby_template


def fetch(release: HiveRelease) -> Path:
    """Everything ``release`` needs to run, fetched and prepared unless cached; its distribution directory."""
    classpath(release)
    derby_template(release)
    return release.home


#: Warnings and errors to the metastore's log (its standard output): the standalone metastore looks for this
#: file on its classpath, whose first entry is the metastore's directory, and logs nothing without it.
LOG4J2 = """status = WARN
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = console
"""


def metastore(
    release: HiveRelease, root: Path, settings: dict[str, str] | None = None
) -> HiveReferenceMetastore:
    """A (not yet started) stock metastore of ``release`` in ``root``, a notification log source."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "metastore-log4j2.properties").write_text(LOG4J2)
    properties = {**source_settings(), **dict(release.extra_settings), **(settings or {})}
    return HiveReferenceMetastore(
        root,
        heap="512m",
        properties=properties,
        jars=classpath(release),
        java=java(release),
        derby_template=derby_template(release),
        jvm_options=JVM_OPTIONS,
    )


@contextmanager
def running(
    release: HiveRelease, root: Path, settings: dict[str, str] | None = None
) -> Iterator[HiveReferenceMetastore]:
    """A started metastore that answers Thrift calls, stopped (its process group killed) on leaving."""
    with metastore(release, root, settings) as hive:
        hive.wait_ready(timeout=180)
        yield hive


def cli(argv: list[str]) -> int:
    """Fetch the releases named (default: all), printing one directory per line."""
    try:
        for version in argv or list(RELEASES):
            print(fetch(RELEASES[version]))
    except (FetchError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
