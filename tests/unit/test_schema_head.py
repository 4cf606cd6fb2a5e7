"""Opening a metastore whose schema is current loads no Alembic; one behind is still upgraded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import text

from hmsrepl.metastore.database import (
    SCHEMA_HEAD,
    alembic_config,
    make_engine,
    recorded_revision,
    upgrade_schema,
)


def test_the_recorded_head_is_the_newest_migration() -> None:
    """A migration added without moving ``SCHEMA_HEAD`` would be skipped on every database at the old head."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    assert script.get_current_head() == SCHEMA_HEAD


def test_a_current_schema_is_opened_without_loading_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    upgrade_schema(url)
    probe = (
        "import sys\n"
        "from hmsrepl.metastore.database import upgrade_schema\n"
        f"upgrade_schema({url!r})\n"
        "print('alembic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_schema_behind_the_head_is_still_upgraded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    upgrade_schema(url, "0014_versiondirs")
    assert recorded_revision(url) == "0014_versiondirs"
    upgrade_schema(url)
    assert recorded_revision(url) == SCHEMA_HEAD
    engine = make_engine(url)
    with engine.connect() as conn:  # the head's own change is there: the databases' location keys
        assert {"location_key"} <= set(conn.execute(text("SELECT * FROM dbs")).keys())
    engine.dispose()


def test_a_new_database_records_no_revision_and_is_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    assert recorded_revision(url) is None
    upgrade_schema(url)
    assert recorded_revision(url) == SCHEMA_HEAD
