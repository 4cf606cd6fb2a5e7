"""The jar of the Hadoop-API copier (``java/hmsrepl/spark/HadoopCopy.java``), compiled against pyspark's jars.

    python -m hmsrepl.spark.hadoop_jar     # build it (a no-op when cached), print its path

Why compiled here and not shipped as a binary: it must match the Spark and Hadoop client the installation
runs (pyspark's ``jars/``: ``spark-core``, ``hadoop-client-api``), and a source file plus ``javac`` keeps the
product free of prebuilt artefacts. The jar is cached under ``HMSREPL_JAR_CACHE`` (default ``var/jars`` of
the checkout, else ``~/.cache/hmsrepl/jars``), named by a hash of the source and the pyspark version, so a
changed source or an upgraded pyspark builds anew and a stale jar is never used. ``make setup`` can run this
module; the copy builds it on first use when it is missing (``javac`` needed, ~3 s once).
"""

from __future__ import annotations

import hashlib
import os
import shutil  # noqa: TID251 - the copier's jar in its cache directory, no warehouse file
import subprocess
import sys
import tempfile  # noqa: TID251 - as above: the jar's build directory
import threading
from pathlib import Path  # noqa: TID251 - the packaged Java source and the jar cache

from hmsrepl.exceptions import StorageError

SOURCE = Path(__file__).with_name("java") / "hmsrepl" / "spark" / "HadoopCopy.java"
CLASS_NAME = "hmsrepl.spark.HadoopCopy"
CACHE_ENV = "HMSREPL_JAR_CACHE"
_lock = threading.Lock()


def cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "include" / "hmsrepl").is_dir():
        return checkout / "var" / "jars"
    return Path.home() / ".cache" / "hmsrepl" / "jars"


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def jar_path() -> Path:
    """Where the jar for this source and this pyspark lives (built or not)."""
    import pyspark

    digest = hashlib.sha256(SOURCE.read_bytes() + pyspark.__version__.encode()).hexdigest()[:12]
    return cache_dir() / f"hmsrepl-hadoop-copy-{digest}.jar"


def build() -> Path:
    """The jar, compiled now when it is not cached; StorageError naming the fix when it cannot be."""
    jar = jar_path()
    with _lock:
        if jar.exists():
            return jar
        javac, jar_tool = shutil.which("javac"), shutil.which("jar")
        if javac is None or jar_tool is None:
            raise StorageError(
                "the Hadoop-API copier needs a JDK (javac and jar) to be built once: install one, or set "
                "HMSREPL_SPARK_HDFS_COPY=python to copy through WebHDFS"
            )
        jar.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=jar.parent) as work:
            classes = Path(work) / "classes"
            done = subprocess.run(
                [
                    javac,
                    "--release",
                    "17",
                    "-nowarn",
                    "-cp",
                    f"{pyspark_jars()}/*",
                    "-d",
                    str(classes),
                    str(SOURCE),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise StorageError(f"compiling {SOURCE.name} failed: {done.stderr.strip()[-800:]}")
            partial = Path(work) / jar.name
            subprocess.run(
                [jar_tool, "cf", str(partial), "-C", str(classes), "."], check=True, capture_output=True
            )
            partial.replace(jar)  # whole or not at all: a concurrent reader never sees half a jar
    return jar


if __name__ == "__main__":
    try:
        print(build())
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
