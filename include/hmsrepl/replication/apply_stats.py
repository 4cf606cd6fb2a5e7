"""What a load did, counted as it goes: shared by the writer's metadata and data jobs and reported by the load."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ApplyStats:
    tables: int = 0
    partitions: int = 0
    files_copied: int = 0
    bytes_copied: int = 0
    files_from_cmroot: int = 0
    files_prefetched: int = 0
    files_removed: int = 0
    files_kept: int = 0  # linked into a new version from the current one, without reading them
    files_reverified: int = 0  # kept files whose size or modification time differed from the record: read
    skipped_events: dict[str, int] = field(default_factory=dict)

    def add(self, other: ApplyStats) -> None:
        """Count what ``other`` counted too (the writers of a load's parallel tables each count their own)."""
        for name, value in vars(other).items():
            if name == "skipped_events":
                for kind, count in value.items():
                    self.skipped_events[kind] = self.skipped_events.get(kind, 0) + count
            else:
                setattr(self, name, getattr(self, name) + value)
