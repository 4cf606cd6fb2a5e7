"""The stock Hive Metastores a benchmark runs next to ours, chosen by version (``--hive 2.3.10,4.2.0``).

2.3.10 is the one in pyspark's jars (``bench.hive_reference``); 3.1.3 and 4.2.0 are the pinned Maven Central
peers of ``tests.peers.hive_metastore``, which always keep their notification log with hcatalog's
``DbNotificationListener`` (4.2.0 stands for Hive 4: 4.0.x's listener is not on Central). All run on Derby
on loopback, each JVM in its own process group, killed on leaving ``started`` (also on Ctrl-C and errors).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.hive_reference import (
    LISTENER_CLASS,
    LISTENER_SETTING,
    HiveReferenceMetastore,
    compile_notification_listener,
    hive_version,
    java_version,
)
from tests.peers import hive_metastore

PYSPARK_HIVE = "2.3.10"
VERSIONS = (PYSPARK_HIVE, *hive_metastore.RELEASES)
#: Two JVMs booting at once on a loaded 2-core machine need longer than one alone.
READY_TIMEOUT_SECONDS = 240.0


def versions(text: str) -> tuple[str, ...]:
    """``--hive``'s value: comma-separated versions, each one of ``VERSIONS`` (an argparse ``type``)."""
    chosen = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    unknown = [v for v in chosen if v not in VERSIONS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"unknown Hive Metastore version {','.join(unknown) or repr(text)}: choose from {','.join(VERSIONS)}"
        )
    return chosen


def stock_metastore(version: str, root: Path, *, notification_log: bool = False) -> HiveReferenceMetastore:
    """A not yet started metastore of ``version`` in ``root``. ``notification_log`` adds the test listener
    to 2.3.10 (pyspark's jars lack hcatalog's); 3.1.3 and 4.2.0 always run their own."""
    if version != PYSPARK_HIVE:
        return hive_metastore.metastore(hive_metastore.RELEASES[version], root)
    if hive_version() != PYSPARK_HIVE:
        raise RuntimeError(f"pyspark's jars hold Hive Metastore {hive_version()}, not {PYSPARK_HIVE}")
    if not notification_log:
        return HiveReferenceMetastore(root)
    classes = compile_notification_listener(root.parent / f"{root.name}-listener")
    return HiveReferenceMetastore(
        root, properties={LISTENER_SETTING: LISTENER_CLASS}, classpath=(str(classes),)
    )


@dataclass(frozen=True)
class StockPeer:
    """One started stock metastore and how to name it in a table."""

    version: str
    metastore: HiveReferenceMetastore

    @property
    def label(self) -> str:
        return f"hive {self.version}"

    @property
    def port(self) -> int:
        return self.metastore.port

    def describe(self) -> str:
        """One line for a benchmark's environment block: jars, Java and whether it keeps a notification log."""
        if self.version == PYSPARK_HIVE:
            jars, log = "pyspark's jars", "no notification log"
        else:
            jars, log = "Maven Central jars", "hcatalog DbNotificationListener on"
        return f"Hive Metastore {self.version} on Derby ({jars}, {log}), {java_version(self.metastore.java)}"

    def wait_ready(self) -> None:
        self.metastore.wait_ready(timeout=READY_TIMEOUT_SECONDS)


@contextmanager
def started(chosen: Sequence[str], root: Path) -> Iterator[list[StockPeer]]:
    """Launch every chosen metastore under ``root/hive-<version>`` and yield them at once, still booting, so
    the caller prepares its own server meanwhile and calls ``wait_ready`` before the first request."""
    with ExitStack() as stack:
        yield [
            StockPeer(version, stack.enter_context(stock_metastore(version, root / f"hive-{version}")))
            for version in chosen
        ]


__all__ = ["VERSIONS", "StockPeer", "started", "stock_metastore", "versions"]
