"""The one error every part of a restore raises for input or state it must refuse."""

from __future__ import annotations

from hmsrepl.exceptions import HmsReplError


class RestoreError(HmsReplError):
    """A restore that cannot be made as asked; the message names the object and what to do, on one line."""
