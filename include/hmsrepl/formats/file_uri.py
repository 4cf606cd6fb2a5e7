"""The encoded file URI of events and ``_files``: ``fileuri#checksum#cmrooturi#subdir`` (Hive's layout).

``fileuri`` is where the file lived when the event happened, ``checksum`` identifies that exact content,
``cmrooturi`` is the change-manager root the file is recycled into if it is later dropped or replaced, and
``subdir`` is the directory between the table/partition location and the file (e.g. a ``delta_*`` dir), so
a loader can put the file at the same place under the target location. Empty parts are allowed; trailing
``#`` separators may be omitted on read.
"""

from __future__ import annotations

from dataclasses import dataclass

SEPARATOR = "#"


@dataclass(frozen=True)
class EncodedFileUri:
    file_uri: str
    checksum: str = ""
    cmroot: str = ""
    subdir: str = ""

    def encode(self) -> str:
        for part_name in ("file_uri", "checksum", "cmroot", "subdir"):
            if SEPARATOR in getattr(self, part_name):
                raise ValueError(
                    f"{part_name} '{getattr(self, part_name)}' contains '#', which cannot be encoded"
                )
        return SEPARATOR.join((self.file_uri, self.checksum, self.cmroot, self.subdir))

    @property
    def file_name(self) -> str:
        return self.file_uri.rstrip("/").rsplit("/", 1)[-1]

    @classmethod
    def decode(cls, text: str) -> EncodedFileUri:
        parts = text.split(SEPARATOR)
        if not parts[0] or len(parts) > 4:
            raise ValueError(f"malformed file URI '{text}'; expected 'fileuri#checksum#cmrooturi#subdir'")
        parts += [""] * (4 - len(parts))
        return cls(parts[0], parts[1], parts[2], parts[3])
