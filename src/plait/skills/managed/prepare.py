"""Preparing a skill version: everything that can fail happens here, before any state changes.

:meth:`Preparer.prepare` reads the body and the file list from the source, resolves the skill's
own Python tools, builds its workspace and script tools, wraps every tool and checks the names.
It returns a sealed :class:`~plait.skills.managed.records.LoadedSkill` that is not yet
initialized; on any failure it removes what it built and raises. ``load`` and ``refresh`` commit
a prepared record only after it succeeded (prepare-then-swap).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from plait.sandbox import SandboxError, SandboxUnavailable
from plait.skills.catalog import SkillCatalog
from plait.skills.managed.errors import (
    SkillLoadFailed,
    SkillManagerError,
    SkillSandboxUnavailable,
    SkillToolInvalid,
)
from plait.skills.managed.records import Channel, LoadedSkill
from plait.skills.managed.scripts import ScriptConfig, materialize, script_paths, script_tool_name
from plait.skills.managed.tools import Gate, SkillOwnedTool, script_tool
from plait.skills.model import SkillEntry
from plait.tools import Tool

__all__ = ["TOOL_NAME", "Preparer", "SkillTools", "SkillToolsProvider", "check_tool_names"]

TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
"""The rule every skill tool name must follow (it is also what providers accept)."""

SkillToolsProvider = Callable[[SkillEntry], Sequence[Tool] | Awaitable[Sequence[Tool]]]
"""Returns the Python tools a skill brings, given its catalog entry; called on every load."""

SkillTools = Mapping[str, Sequence[Tool]] | SkillToolsProvider
"""Skill-owned tools: a mapping from skill name to tools, or a resolver."""


def check_tool_names(skill: str, tools: Iterable[Tool]) -> None:
    """Raise :class:`SkillToolInvalid` for a malformed name or two tools sharing one name."""
    seen: set[str] = set()
    for tool in tools:
        if not TOOL_NAME.fullmatch(tool.name):
            raise SkillToolInvalid(
                f"Skill '{skill}' has a tool named {tool.name!r}, which does not match "
                f"{TOOL_NAME.pattern}; rename it (letters, digits, '_' and '-', at most 64)."
            )
        if tool.name in seen:
            raise SkillToolInvalid(
                f"Skill '{skill}' has two tools named {tool.name!r}; rename one of them."
            )
        seen.add(tool.name)


@dataclass(slots=True)
class Preparer:
    """Builds records for one manager (its catalog, skill tools, script config and gate)."""

    catalog: SkillCatalog
    skill_tools: SkillTools | None
    scripts: ScriptConfig | None
    gate: Gate
    owner: object

    async def prepare(self, entry: SkillEntry, channel: Channel) -> LoadedSkill:
        """A sealed, not yet initialized record for ``entry``; raises on any failure."""
        source = self.catalog.source(entry.source_id)
        try:
            body = (await source.read(entry.id)).decode("utf-8", errors="replace")
            # The body must be the version the catalog discovered: a SKILL.md edited since
            # would otherwise be loaded under the old version (and refresh would swap a
            # version that is already in place).
            current = (await source.stat(entry.id)).version
            if current != entry.version:
                raise SkillLoadFailed(
                    f"Skill '{entry.name}' changed in its source since it was discovered "
                    f"(version {entry.version}, now {current}). Nothing was loaded; call "
                    "list_skills with refresh=true, then load it again."
                )
            files = await source.list(entry.id)
            owned = await self._owned_tools(entry)
        except SkillManagerError:
            raise
        except Exception as err:
            raise SkillLoadFailed(
                f"Skill '{entry.name}' could not be loaded: {type(err).__name__}: {err}. "
                "Nothing was loaded."
            ) from err
        record = LoadedSkill(entry, body, channel)
        try:
            tools: list[Tool] = [SkillOwnedTool(t, record, self.gate, self.owner) for t in owned]
            tools += await self._script_tools(record, files)
            check_tool_names(entry.name, tools)
        except BaseException:
            record.release()
            raise
        record.seal(tuple(tools))
        return record

    async def _owned_tools(self, entry: SkillEntry) -> list[Tool]:
        if self.skill_tools is None:
            return []
        if callable(self.skill_tools):
            found = self.skill_tools(entry)
            tools = list(await found if inspect.isawaitable(found) else found)
        else:
            tools = list(self.skill_tools.get(entry.name, ()))
        for tool in tools:
            if not isinstance(tool, Tool):
                raise SkillToolInvalid(
                    f"skill_tools for '{entry.name}' gave {tool!r}, which is not a plait Tool; "
                    "wrap functions with @tool."
                )
        return tools

    async def _script_tools(self, record: LoadedSkill, files: Sequence[str]) -> list[Tool]:
        config = self.scripts
        scripts = script_paths(files, config) if config is not None else []
        if config is None or not scripts:
            return []
        entry = record.entry
        try:
            await config.sandbox.check()
        except SandboxUnavailable as err:
            raise SkillSandboxUnavailable(
                f"Skill '{entry.name}' has scripts, but they cannot run sandboxed here: {err} "
                "Nothing was loaded.",
                err.cause,
            ) from err
        except SandboxError as err:
            raise SkillLoadFailed(
                f"Skill '{entry.name}' has scripts, but its sandbox is misconfigured: {err} "
                "Nothing was loaded."
            ) from err
        source = self.catalog.source(entry.source_id)
        try:
            record.workspace = await materialize(
                source, entry.id, files, entry.name, config.workspace_dir
            )
        except Exception as err:
            raise SkillLoadFailed(
                f"Skill '{entry.name}': building its script workspace failed: "
                f"{type(err).__name__}: {err}. Nothing was loaded."
            ) from err
        return [
            SkillOwnedTool(
                script_tool(record, path, config, script_tool_name(entry.name, path)),
                record,
                self.gate,
                self.owner,
            )
            for path in scripts
        ]
