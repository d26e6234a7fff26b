"""Typed events of managed mode, emitted through ``TurnContext.emit`` when the operation had a
context (a tool call, a hook); application calls without one emit nothing.

Named like every plait event: the subject, then what happened to it (see
:mod:`plait.middleware.context`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plait.middleware.context import Event

__all__ = [
    "SkillLoaded",
    "SkillRestoreFailed",
    "SkillSwapFailed",
    "SkillSwapped",
    "SkillUnloaded",
    "SkillUpdateFound",
]


@dataclass(slots=True, kw_only=True)
class SkillLoaded(Event):
    """A skill was loaded. ``sandbox`` names what runs its scripts (``"bubblewrap"``,
    ``"unsandboxed"``), None when it has no script tools."""

    skill: str
    version: str
    tools: tuple[str, ...] = field(default_factory=tuple)
    sandbox: str | None = None
    type: str = "skill_loaded"


@dataclass(slots=True, kw_only=True)
class SkillUnloaded(Event):
    skill: str
    version: str
    type: str = "skill_unloaded"


@dataclass(slots=True, kw_only=True)
class SkillSwapped(Event):
    """A loaded skill was swapped to a new version (prepared fully first)."""

    skill: str
    old_version: str
    new_version: str
    type: str = "skill_swapped"


@dataclass(slots=True, kw_only=True)
class SkillSwapFailed(Event):
    """Preparing a new version failed; the old version stays loaded."""

    skill: str
    version: str
    error: str
    type: str = "skill_swap_failed"


@dataclass(slots=True, kw_only=True)
class SkillUpdateFound(Event):
    """A catalog refresh found a newer version of a loaded skill (not swapped)."""

    skill: str
    loaded_version: str
    available_version: str
    type: str = "skill_update_found"


@dataclass(slots=True, kw_only=True)
class SkillRestoreFailed(Event):
    """A skill recorded as loaded on the thread could not be loaded again; it was skipped."""

    skill: str
    error: str
    type: str = "skill_restore_failed"
