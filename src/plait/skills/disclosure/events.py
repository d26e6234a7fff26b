"""Typed events of disclosure mode, emitted through ``TurnContext.emit``.

They reach a streaming caller live and a ``run`` caller in ``RunResult.events``, so a broken skill,
an unknown skill tool or a withdrawn tool is never silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plait.middleware.context import Event
from plait.skills.diagnostics import Diagnostic

__all__ = [
    "SkillCatalogLoaded",
    "SkillPinned",
    "SkillProblemFound",
    "SkillToolUnresolved",
    "SkillToolsDisclosed",
    "SkillToolsWithdrawn",
]


@dataclass(slots=True, kw_only=True)
class SkillCatalogLoaded(Event):
    """The thread's skills were (re)loaded before a model call.

    ``reason`` is ``"first"`` (new thread), ``"reset"`` (``skills_metadata`` was set to
    ``None``), ``"auto_refresh"`` or ``"restored"`` (the thread was loaded in another process, so
    its skills were read again). ``added``/``removed``/``changed`` name skills against the
    thread's previous list (empty on a first load).
    """

    thread_id: str
    reason: str
    skills: int
    skipped: int
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    type: str = "skill_catalog_loaded"


@dataclass(slots=True, kw_only=True)
class SkillProblemFound(Event):
    """One warning or error found while loading: a skipped skill (``skipped=True``), a skill that
    loaded with a warning, or a source that failed. ``skill`` is the source-assigned id, when the
    problem is about one skill."""

    thread_id: str
    source_id: str
    skill: str | None
    diagnostic: Diagnostic
    skipped: bool
    type: str = "skill_problem_found"


@dataclass(slots=True, kw_only=True)
class SkillPinned(Event):
    """A pinned skill's SKILL.md body was appended to the conversation as a user message."""

    thread_id: str
    name: str
    path: str
    type: str = "skill_pinned"


@dataclass(slots=True, kw_only=True)
class SkillToolsDisclosed(Event):
    """Skill tools became visible (``tools``), or deferred agent tools were disclosed early
    (``deferred``), because a skill listing them was read or pinned."""

    dispatch: int
    tools: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    type: str = "skill_tools_disclosed"


@dataclass(slots=True, kw_only=True)
class SkillToolsWithdrawn(Event):
    """Skill tools were hidden again: the read or pin that disclosed them left the request
    (compaction dropped it) or the skill is gone after a reload."""

    dispatch: int
    tools: list[str] = field(default_factory=list)
    type: str = "skill_tools_withdrawn"


@dataclass(slots=True, kw_only=True)
class SkillToolUnresolved(Event):
    """``metadata.include_tools`` named a tool that neither the agent nor the middleware's
    ``tools`` provide (or the resolver raised: ``error``). The name stays hidden."""

    name: str
    skills: list[str] = field(default_factory=list)
    error: BaseException | None = None
    type: str = "skill_tool_unresolved"
