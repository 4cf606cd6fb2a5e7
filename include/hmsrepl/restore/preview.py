"""``--preview``: what a restore would change, which files it would place and from where, and how many bytes.

The same plan the executor runs, printed: a preview that said one thing and a run that did another would be
worse than none. Long file lists are cut at ``limit`` lines in text; ``as_json`` gives all of them.
"""

from __future__ import annotations

from typing import Any

from hmsrepl.restore.plan import ObjectPlan, RestorePlan


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _object_line(obj: ObjectPlan) -> str:
    parts = [f"{obj.action} {obj.what}"]
    if obj.place:
        cm = sum(p.from_cmroot for p in obj.place)
        parts.append(f"place {len(obj.place)} files, {human_bytes(obj.bytes)} ({cm} from cmroot)")
    if obj.keep:
        parts.append(f"keep {len(obj.keep)} files")
    if obj.remove:
        parts.append(f"remove {len(obj.remove)} files")
    return ": ".join(parts[:1]) + (": " + ", ".join(parts[1:]) if len(parts) > 1 else "")


def as_text(plan: RestorePlan, limit: int = 50) -> str:
    as_of = f" as of event {plan.as_of}" if plan.as_of is not None else ""
    lines = [f"restore ({plan.action}) of {plan.target}{as_of}"]
    if plan.database is not None:
        lines.append(f"  create database '{plan.database.name}' at {plan.database.location_uri}")
    for function in plan.functions:
        lines.append(f"  create function '{function.db_name}.{function.function_name}'")
    for table in plan.tables:
        if table.create:
            lines.append(
                f"  create table '{table.table.qualified_name}' from '{table.source}' as of event {table.as_of}"
                f" at {table.table.sd.location}"
            )
        shown = table.objects[1:] if table.create and not table.objects[0].place else table.objects
        for obj in shown:
            lines.append(f"    {_object_line(obj)}")
    placements = plan.placements
    from_cm = [p for p in placements if p.from_cmroot]
    removed = sum(len(obj.remove) for obj in plan.objects)
    lines.append(
        f"  total: {len(placements)} files, {human_bytes(plan.bytes)} to place ({len(from_cm)} from cmroot), "
        f"{removed} files to remove"
    )
    if from_cm:
        lines.append("  cmroot files needed:")
        lines += [f"    {p.source} -> {p.target}" for p in from_cm[:limit]]
        if len(from_cm) > limit:
            lines.append(f"    ... and {len(from_cm) - limit} more (--json lists all)")
    lines += [f"  note: {note}" for note in plan.notes]
    reason = plan.refusal()
    lines.append(
        f"  REFUSED: {reason}" if reason else "  nothing changed (preview); run without --preview to restore"
    )
    return "\n".join(lines)


def as_json(plan: RestorePlan) -> dict[str, Any]:
    return {
        "action": plan.action,
        "target": plan.target,
        "as_of": plan.as_of,
        "database": plan.database.name if plan.database else None,
        "functions": [f"{f.db_name}.{f.function_name}" for f in plan.functions],
        "tables": [
            {
                "table": t.table.qualified_name,
                "from": t.source,
                "as_of": t.as_of,
                "create": t.create,
                "objects": [
                    {
                        "what": o.what,
                        "action": o.action,
                        "location": o.location,
                        "place": [
                            {
                                "source": p.source,
                                "target": p.target,
                                "bytes": p.size,
                                "from_cmroot": p.from_cmroot,
                            }
                            for p in o.place
                        ],
                        "keep": [p.target for p in o.keep],
                        "remove": o.remove,
                    }
                    for o in t.objects
                ],
            }
            for t in plan.tables
        ],
        "files": len(plan.placements),
        "bytes": plan.bytes,
        "missing": plan.missing,
        "notes": plan.notes,
        "refused": plan.refusal(),
    }
