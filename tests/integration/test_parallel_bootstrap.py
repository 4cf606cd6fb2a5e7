"""A bootstrap load writes several tables at once on a database server, with the same outcome and the same
restart as one table at a time.

Each table commits in its own transaction and the replicated position only after the last: a load that fails
part way (here one table's write fails while others run) leaves whole tables and a position that says the
bootstrap is not done; run again, it finishes and the replica equals the source.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import LoadEngine, repl_status
from hmsrepl.replication.metrics import MetricsLog
from hmsrepl.replication.replications import ReplicationConfigError
from hmsrepl.replication.table_pool import PARALLELISM_ENV, load_parallelism
from hmsrepl.replication.verify import verify
from tests.helpers import open_partitioned_source, open_replica

TABLES = 6


def _source(root: Path) -> Metastore:
    return open_partitioned_source(root, "shop", TABLES)


@pytest.mark.parametrize("server", ["postgres", "mysql"])
def test_tables_loaded_in_parallel_equal_the_source_and_a_failed_load_finishes_when_run_again(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    from tests.backends import temporary_database

    request.applymarker(getattr(pytest.mark, server))
    monkeypatch.setenv(PARALLELISM_ENV, "3")
    # A transaction a table: small tables would otherwise share one, and one worker could take them all.
    monkeypatch.setattr("hmsrepl.replication.load.BOOTSTRAP_BATCH_OBJECTS", 1)
    source = _source(tmp_path)
    with temporary_database(server, str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        try:
            engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
            dump = engine.execute("REPL DUMP shop").dump_dir
            real = LoadEngine._load_table

            def failing(
                dump_dir: Any, writer: Any, meta: Any, table: dict[str, Any], *rest: Any, **kw: Any
            ) -> int:
                if table["table_name"] == "t4":
                    raise OSError("disk failed while writing t4")
                return real(dump_dir, writer, meta, table, *rest, **kw)

            monkeypatch.setattr(LoadEngine, "_load_table", staticmethod(failing))
            with pytest.raises(Exception, match="disk failed while writing t4"):
                engine.execute(f"REPL LOAD shop_dr FROM '{dump}'")
            assert repl_status(target, "shop_dr") is None  # the bootstrap is not done
            assert "t4" not in target.catalog.get_tables("shop_dr")
            for name in target.catalog.get_tables("shop_dr"):  # whole tables or none
                assert len(target.catalog.get_partition_names("shop_dr", name)) == 3, name

            threads: set[int] = set()

            def watched(
                dump_dir: Any, writer: Any, meta: Any, table: dict[str, Any], *rest: Any, **kw: Any
            ) -> int:
                threads.add(threading.get_ident())
                time.sleep(0.2)  # each table's apply long enough for the threads' to overlap
                return real(dump_dir, writer, meta, table, *rest, **kw)

            monkeypatch.setattr(LoadEngine, "_load_table", staticmethod(watched))
            engine.execute(f"REPL LOAD shop_dr FROM '{dump}'")
            assert repl_status(target, "shop_dr") == source.events.current_event_id()
            assert sorted(target.catalog.get_tables("shop_dr")) == [f"t{n}" for n in range(TABLES)]
            assert verify(source, "shop", target, "shop_dr") == []
            assert len(threads) > 1, threads  # the rest of the tables really were written side by side
            # The run's stages are wall time: the tables applied side by side count once, not once a thread.
            row = MetricsLog(target.engine).list(limit=1)[0]
            assert row.status == "succeeded" and row.seconds is not None
            assert row.stages["apply"] <= row.seconds + 0.01, (row.stages, row.seconds)
        finally:
            target.close()
            source.close()


def test_parallelism_defaults_by_backend_and_a_bad_setting_is_refused_before_the_load_changes_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _source(tmp_path)
    target = open_replica(f"sqlite:///{tmp_path}/target.db", tmp_path)
    try:
        monkeypatch.delenv(PARALLELISM_ENV, raising=False)
        assert load_parallelism(target) == 1  # SQLite has one writer at a time
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        dump = engine.execute("REPL DUMP shop").dump_dir
        for bad in ("0", "many", "1000"):
            monkeypatch.setenv(PARALLELISM_ENV, bad)
            with pytest.raises(ReplicationConfigError) as info:
                engine.execute(f"REPL LOAD shop_dr FROM '{dump}'")
            message = str(info.value)
            assert PARALLELISM_ENV in message and repr(bad) in message and "\n" not in message, message
            assert "shop_dr" not in target.catalog.get_databases()
        monkeypatch.setenv(PARALLELISM_ENV, "2")  # honoured on SQLite too: its writers then take turns
        engine.execute(f"REPL LOAD shop_dr FROM '{dump}'")
        assert verify(source, "shop", target, "shop_dr") == []
    finally:
        target.close()
        source.close()
