"""The events the workspace battery emits."""

from __future__ import annotations

from dataclasses import dataclass

from plait.middleware.context import Event

__all__ = ["ProjectContextLoaded", "ProjectFile"]


@dataclass(slots=True, frozen=True)
class ProjectFile:
    """One instructions file found: its path, the characters it added, whether it was cut."""

    path: str
    chars: int
    cut: bool


@dataclass(slots=True, kw_only=True)
class ProjectContextLoaded(Event):
    """The project instructions a turn's system prompt carries (empty ``files``: none found)."""

    files: list[ProjectFile]
    chars: int
    type: str = "project_context_loaded"
