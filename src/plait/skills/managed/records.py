"""Manager state: one :class:`LoadedSkill` per *initialized* skill, and the plain results the
manager hands back (:class:`LoadResult`, :class:`ProjectedSkill`, :class:`SkillStatus`, …).

A record owns what lives with the skill rather than the turn: its body, its wrapped tools, its
workspace and the script processes running in it. It is *retired* when the skill is unloaded,
replaced by a refresh or the manager is closed; its workspace goes when the last in-flight
call leaves (:meth:`LoadedSkill.exit`) or when the manager forces it (:meth:`LoadedSkill.release`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Literal

from plait.messages import SystemMessage
from plait.sandbox import RunningProcess
from plait.skills.managed.errors import SkillNotLoaded
from plait.skills.managed.scripts import Workspace
from plait.skills.model import SkillEntry, SkillRef
from plait.tools import Tool

__all__ = [
    "META_KEY",
    "CatalogRefresh",
    "Channel",
    "LoadResult",
    "LoadedSkill",
    "ProjectedSkill",
    "RefreshOutcome",
    "SkillStatus",
    "placeholder",
]

Channel = Literal["handle", "inline"]
"""How a body reaches the model: ``handle`` (a note with a handle; the model reads the body with
``read_skill_body``) or ``inline`` (the body itself, projected into every request)."""

META_KEY = "plait.skills.managed"
"""Metadata key on every message the manager projects or rewrites."""


def placeholder(skill: str) -> str:
    """What replaces a body read in the thread store and after the strip."""
    return f"[skill body of {skill} omitted: projected, not persisted]"


class LoadedSkill:
    """One initialized skill (manager state). Created by the manager, never by users."""

    __slots__ = (
        "_idle",
        "_in_flight",
        "_no_processes",
        "_processes",
        "_retired",
        "body",
        "channel",
        "entry",
        "message",
        "tools",
        "update_available",
        "workspace",
    )

    def __init__(self, entry: SkillEntry, body: str, channel: Channel) -> None:
        self.entry = entry
        self.body = body
        self.channel: Channel = channel
        self.tools: tuple[Tool, ...] = ()
        self.workspace: Workspace | None = None
        self.update_available = False
        self.message = SystemMessage()
        self._in_flight = 0
        self._idle: asyncio.Event | None = None
        self._retired = False
        self._processes: set[RunningProcess] = set()
        self._no_processes: asyncio.Event | None = None

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def version(self) -> str:
        return self.entry.version

    @property
    def handle(self) -> str:
        """The handle ``read_skill_body`` takes; it names the version."""
        return f"skill:{self.entry.name}@{self.entry.version}"

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    @property
    def retired(self) -> bool:
        return self._retired

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def seal(self, tools: tuple[Tool, ...]) -> None:
        """Fix the tools and build the projected message (body or handle note)."""
        self.tools = tools
        names = ", ".join(self.tool_names) or "(none)"
        if self.channel == "inline":
            text = (
                f'<skill_content name="{self.name}" version="{self.version}">\n'
                f"{self.body.strip()}\n</skill_content>\nSkill tools: {names}"
            )
        else:
            text = (
                f"Skill '{self.name}' is loaded (version {self.version}). Its instructions are "
                f'not shown here: read them with read_skill_body(handle="{self.handle}"). '
                f"Skill tools: {names}"
            )
        self.message = SystemMessage(
            text, metadata={META_KEY: {"skill": self.name, "kind": self.channel}}
        )

    def enter(self) -> None:
        """Start a call of one of this skill's tools; a retired skill refuses it."""
        if self._retired:
            raise SkillNotLoaded(
                f"Skill not loaded: {self.name}. It was unloaded or replaced; call "
                "list_loaded_skills, then load_skill again if you need it."
            )
        self._in_flight += 1

    def exit(self) -> None:
        self._in_flight -= 1
        if self._in_flight <= 0 and self._idle is not None:
            self._idle.set()
        if self._retired and self._in_flight <= 0 and self.workspace is not None:
            self.workspace.dispose()

    async def wait_idle(self) -> None:
        """Return once no call of this skill's tools is in flight."""
        if self._in_flight > 0:
            if self._idle is None or self._idle.is_set():
                self._idle = asyncio.Event()
            await self._idle.wait()

    def retire(self) -> None:
        """Mark the record gone; its workspace is removed once no call is in flight."""
        self._retired = True
        if self._in_flight <= 0 and self.workspace is not None:
            self.workspace.dispose()

    def track(self, process: RunningProcess) -> None:
        self._processes.add(process)

    def untrack(self, process: RunningProcess) -> None:
        self._processes.discard(process)
        if not self._processes and self._no_processes is not None:
            self._no_processes.set()

    def release(self) -> None:
        """Force: kill every running script's process tree and remove the workspace now."""
        self._retired = True
        for process in list(self._processes):
            process.kill()
        if self.workspace is not None:
            self.workspace.dispose()

    async def wait_processes(self, seconds: float) -> None:
        """Return once no script of this skill runs any more (killed trees are reaped), or
        after ``seconds``."""
        if not self._processes:
            return
        if self._no_processes is None or self._no_processes.is_set():
            self._no_processes = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._no_processes.wait()

    def __repr__(self) -> str:
        return f"<LoadedSkill {self.name}@{self.version}{' retired' if self._retired else ''}>"


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What ``load`` settled: the skill, its version, how its body reaches the model, its tools."""

    skill: str
    version: str
    channel: Channel
    handle: str
    tools: tuple[str, ...]

    def describe(self) -> dict[str, object]:
        """The result as the ``load_skill`` tool returns it to the model."""
        if self.channel == "inline":
            how = "Its instructions are in context from the next model call on."
        else:
            how = f'Read its instructions with read_skill_body(handle="{self.handle}").'
        note = f"Loaded skill '{self.skill}'. {how}"
        if self.tools:
            note += " Its tools can be called right away: " + ", ".join(self.tools) + "."
        return {
            "skill": self.skill,
            "version": self.version,
            "channel": self.channel,
            "handle": self.handle,
            "tools": list(self.tools),
            "note": note,
        }


@dataclass(frozen=True, slots=True)
class ProjectedSkill:
    """A skill hydrated onto one turn context: callable tools, and whether its body was read."""

    skill: str
    version: str
    channel: Channel
    handle: str
    tools: tuple[str, ...]
    body_reads: int = 0


@dataclass(frozen=True, slots=True)
class SkillStatus:
    """One discovered skill, losing candidates included (``shadowed_by`` set)."""

    ref: SkillRef
    name: str
    description: str
    version: str
    loaded: bool
    loaded_version: str | None = None
    update_available: bool = False
    shadowed_by: SkillRef | None = None
    model_invocable: bool = True


@dataclass(frozen=True, slots=True)
class CatalogRefresh:
    """A catalog-only rediscovery: what changed, and which loaded skills have a newer version
    (never swapped by this; see ``refresh_and_project``)."""

    added: tuple[SkillRef, ...] = ()
    removed: tuple[SkillRef, ...] = ()
    changed: tuple[SkillRef, ...] = ()
    update_available: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    """What ``refresh_and_project`` did to one loaded skill."""

    skill: str
    status: Literal["swapped", "unchanged", "failed"]
    old_version: str
    new_version: str | None = None
    error: str | None = None

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {"skill": self.skill, "status": self.status}
        out["old_version"] = self.old_version
        if self.new_version is not None:
            out["new_version"] = self.new_version
        if self.error is not None:
            out["error"] = self.error
            out["note"] = "The old version stays loaded."
        return out
