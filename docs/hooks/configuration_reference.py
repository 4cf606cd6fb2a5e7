"""MkDocs hook: the configuration page's tables, generated from the code at every docs build.

The settings of a metastore instance are the fields of ``hmsrepl.config.MetastoreConfig`` and of the server's
limits ``hmsrepl.bounds.ResourceBounds`` (environment prefix ``HMSREPL_``): their names, defaults and descriptions come from the model itself, so the reference cannot
drift from what the code reads. Every other ``HMSREPL_*`` variable the code reads (the replication sides, the
applications, the DAGs, limits) is listed with the modules that read it and the pages that explain it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CODE_DIRS = ("include", "spark_apps", "plugins", "dags")
VARIABLE = re.compile(r"HMSREPL_[A-Z0-9_]*[A-Z0-9]")
MARKER = "<!-- generated: settings -->"


def config_variables() -> list[tuple[str, str, str]]:
    """(variable, default, description) of every ``MetastoreConfig`` field, then of every ``ResourceBounds``
    field (the serving process's limits: connections, workers, memory budget, deadlines)."""
    from hmsrepl.bounds import ResourceBounds
    from hmsrepl.config import MetastoreConfig

    rows = []
    fields = [*MetastoreConfig.model_fields.items(), *ResourceBounds.model_fields.items()]
    for name, field in fields:
        factory = field.default_factory
        default = repr(factory() if factory is not None else field.default)  # type: ignore[call-arg]
        if name in ("warehouse", "cmroot"):
            default = f"'var/{name}' (absolute)"  # made absolute from the working directory
        rows.append((f"HMSREPL_{name.upper()}", default, field.description or ""))
    return rows


def code_variables() -> dict[str, list[str]]:
    """Every ``HMSREPL_*`` name the code spells out, with the files that spell it."""
    found: dict[str, list[str]] = {}
    for top in CODE_DIRS:
        for path in sorted((REPO / top).rglob("*.py")):
            for name in sorted(set(VARIABLE.findall(path.read_text(encoding="utf-8")))):
                found.setdefault(name, []).append(str(path.relative_to(REPO)))
    return found


#: Pages kept beside the code they describe (the Airflow layer's settings), searched too.
SIDE_PAGES = ("dags/README.md", "plugins/README.md")


def explained_in(docs: Path, variable: str) -> list[str]:
    """The hand-written pages that name ``variable``: docs pages as links, the side pages by path."""
    pages = [
        f"[{p.name}]({p.name})"
        for p in sorted(docs.glob("*.md"))
        if p.name != "configuration.md" and variable in p.read_text(encoding="utf-8")
    ]
    return pages + [
        f"`{side}`" for side in SIDE_PAGES if variable in (REPO / side).read_text(encoding="utf-8")
    ]


def reference(docs: Path) -> str:
    settings = config_variables()
    lines = ["| variable | default | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{var}` | `{default}` | {meaning} |" for var, default, meaning in settings]
    own = {var for var, _, _ in settings}
    lines += ["", "### Other variables", "", "| variable | read by | explained in |", "| --- | --- | --- |"]
    for var, files in sorted(code_variables().items()):
        if var in own or var.endswith("_"):
            continue
        pages = ", ".join(explained_in(docs, var)) or "-"
        lines.append(f"| `{var}` | {', '.join(f'`{f}`' for f in files[:3])} | {pages} |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference(Path(config["docs_dir"])))
