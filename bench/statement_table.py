"""What the replication and notification-log benchmarks share: the backend choice and the printed tables.

``--backend all`` runs SQLite, PostgreSQL and MariaDB in one command (the servers come from
HMSREPL_TEST_POSTGRES_URL and HMSREPL_TEST_MYSQL_URL, as the tests use them), so figures taken in one run
window compare; each figure is printed beside SQLite's with the ratio to it.
"""

from __future__ import annotations

from collections.abc import Sequence

BACKENDS = ("sqlite", "postgres", "mysql")
CHOICES = (*BACKENDS, "all")


def chosen_backends(value: str) -> list[str]:
    """The backends a ``--backend``/``--backends`` value names: one, a comma-separated list, or ``all``."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if "all" in names:
        return list(BACKENDS)
    unknown = sorted(set(names) - set(BACKENDS))
    if unknown or not names:
        raise SystemExit(f"unknown backend(s) {unknown or [value]}: choose from {', '.join(CHOICES)}")
    return names


def print_grid(title: str, rows: Sequence[tuple[str, dict[str, str]]], backends: Sequence[str]) -> None:
    """One line per measurement, one column per backend (cells already formatted)."""
    header = ("measurement", *backends)
    lines = [(name, *(cells.get(backend, "-") for backend in backends)) for name, cells in rows]
    widths = [max(len(line[col]) for line in [header, *lines]) for col in range(len(header))]
    print(f"\n{title}")
    print(
        " | ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    print("-+-".join("-" * w for w in widths))
    for line in lines:
        print(
            " | ".join(
                cell.ljust(w) if i == 0 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )


def versus_sqlite(values: dict[str, float], *, higher_is_better: bool, fmt: str) -> dict[str, str]:
    """Cells for one measurement: each backend's value, and for the others its ratio to SQLite's (how many
    times slower; the issue's goals are stated as "within 1.5x of SQLite")."""
    base = values.get("sqlite")
    cells = {}
    for backend, value in values.items():
        cell = format(value, fmt)
        if backend != "sqlite" and base and value:
            slower = base / value if higher_is_better else value / base
            cell += f" ({slower:.2f}x)"
        cells[backend] = cell
    return cells
