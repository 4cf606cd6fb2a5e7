"""What one incremental DAG run costs: nothing pending, a few small events, 1 GB pending; and the JVM's share.

    python bench/bench_incremental_dag.py [--repeat 3] [--gb 1.0] [--small-events 10]

Real metastore servers (SQLite), the real Airflow metadata DB and ``dag.test()`` of ``hmsrepl_incremental``
for one replication, as the scheduler would run it. For each case it times the run the DAG chooses (nothing
pending: skipped before anything starts; below ``HMSREPL_SPARK_MIN_EVENTS``: ``repl_sync.py`` as a plain
Python process) against the same work forced through spark-submit (``HMSREPL_SPARK_MIN_EVENTS=1``), run
after run, A B A B. The JVM's share of the spark-submit run is (spark-submit run - plain run) / spark-submit
run: what starting and stopping Spark costs on top of the same replication work (nothing pending: both
columns are the same skipped run). Prints median and min after one warm-up run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO), str(REPO / "plugins")]

from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from hmsrepl.replication.load import repl_status  # noqa: E402
from tests.helpers import make_table, write_file  # noqa: E402
from tests.servers import metastore_server  # noqa: E402

DB, REPLICA = "bench", "bench_dr"
CHUNK = b"\x5a" * (1 << 20)


def _airflow_env(home: Path) -> None:
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "HMSREPL_TASK_RETRIES": "0",
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    airflow = Path(sys.executable).parent / "airflow"
    subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True)


def _write_big(location: str, name: str, mib: int) -> None:
    path = Path(location) / name
    with path.open("wb") as out:
        for _ in range(mib):
            out.write(CHUNK)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gb", type=float, default=1.0, help="size of the large pending write")
    parser.add_argument("--small-events", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-incremental-dag-"))
    _airflow_env(root / "airflow")
    with ExitStack() as stack:
        source_server = stack.enter_context(metastore_server(root / "source", f"sqlite:///{root}/source.db"))
        target_server = stack.enter_context(metastore_server(root / "target", f"sqlite:///{root}/target.db"))
        for side, server in (("SOURCE", source_server), ("TARGET", target_server)):
            os.environ[f"HMSREPL_{side}_DB_URL"] = server.db_url
            os.environ[f"HMSREPL_{side}_WAREHOUSE"] = server.warehouse
            os.environ[f"HMSREPL_{side}_CMROOT"] = server.cmroot
            connection = {"conn_type": "generic", "host": "127.0.0.1", "port": server.port, "login": "hive"}
            os.environ[f"AIRFLOW_CONN_HMSREPL_{side}_METASTORE"] = json.dumps(connection)
        os.environ["HMSREPL_DUMP_ROOT"] = str(root / "dumps")
        source, target = Metastore(source_server.config), Metastore(target_server.config)
        stack.callback(source.close)
        stack.callback(target.close)
        source.catalog.create_database(Database(name=DB))
        location = source.catalog.create_table(make_table(DB, "t")).sd.location or ""
        engine = ReplicationEngine(str(root / "dumps"), source, target)
        dumped = engine.execute(f"REPL DUMP {DB}")
        engine.execute(f"REPL LOAD {REPLICA} FROM '{dumped.dump_dir}'")  # type: ignore[union-attr]

        from airflow.dag_processing.dagbag import DagBag

        dag = DagBag(dag_folder=str(REPO / "dags")).dags["hmsrepl_incremental"]
        conf = {"replications": [{"policy": DB, "target_db": REPLICA}], "limit": 500}
        counter = iter(range(1_000_000))

        def run(spark_min_events: int) -> float:
            os.environ["HMSREPL_SPARK_MIN_EVENTS"] = str(spark_min_events)
            started = time.perf_counter()
            state = dag.test(run_conf=conf).state
            seconds = time.perf_counter() - started
            if str(state) != "success":
                raise SystemExit(f"the incremental run ended {state}")
            if repl_status(target, REPLICA) != source.get_current_notification_event_id():
                raise SystemExit("the replica did not catch up")
            return seconds

        def small() -> None:
            for _ in range(args.small_events):
                write_file(location, f"small-{next(counter)}.parquet", b"x" * 4096)
                source.catalog.insert(DB, "t")

        def large() -> None:
            per_file = 256
            for _ in range(max(1, round(args.gb * 1024 / per_file))):
                _write_big(location, f"big-{next(counter)}.parquet", per_file)
            source.catalog.insert(DB, "t")

        def nothing() -> None:
            pass

        cases: list[tuple[str, Callable[[], None]]] = [
            ("nothing pending", nothing),
            (f"{args.small_events} small events", small),
            (f"{args.gb:g} GB pending", large),
        ]
        run(2000)  # warm-up: the first dag.test() of a process pays for imports and serialisation
        print(f"incremental DAG run (dag.test), median (min) of {args.repeat}, seconds")
        print(f"{'case':<22} {'as chosen':>16} {'spark-submit':>16} {'JVM share':>10}")
        for name, prepare in cases:
            chosen, forced = [], []
            for _ in range(args.repeat):
                prepare()
                chosen.append(run(2000))
                prepare()
                forced.append(run(1) if prepare is not nothing else run(2000))
            share = (
                1 - statistics.median(chosen) / statistics.median(forced) if prepare is not nothing else 0.0
            )
            print(
                f"{name:<22} {statistics.median(chosen):>8.2f} ({min(chosen):5.2f}) "
                f"{statistics.median(forced):>8.2f} ({min(forced):5.2f}) {share:>9.0%}"
            )


if __name__ == "__main__":
    main()
