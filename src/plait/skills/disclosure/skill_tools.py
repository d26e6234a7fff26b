"""Skill tools: what ``metadata.include_tools`` makes visible, and keeping the registry in step.

For every name a disclosed skill lists, in the order the skills were disclosed:

=================================================  ==========================================
the name is                                        effect while the read or pin is in context
=================================================  ==========================================
an agent tool, bound                               nothing (it is visible anyway)
an agent tool, deferred (``defer_loading``)        its definition joins the request (without
                                                   ``defer_loading``); the registry keeps it
                                                   deferred, so it stays hidden elsewhere
resolved by the middleware's ``tools``             registered in the turn's registry and
                                                   advertised; unregistered (by identity) when
                                                   no disclosed skill lists it any more
resolved to a tool whose name an agent tool has    the agent tool wins; the skill tool is unused
unknown                                            a ``SkillToolUnresolved`` event; stays hidden
=================================================  ==========================================

"Agent tool" means any tool in the registry that this middleware did not register (the agent's
own tools and other middleware's). A resolver is called lazily, once per name per turn.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from plait.errors import ConfigurationError
from plait.messages import Message
from plait.middleware.context import DispatchContext
from plait.skills.disclosure.events import SkillToolUnresolved
from plait.skills.disclosure.snapshot import SkillSnapshot
from plait.tools import Tool, ToolDefinition, ToolRegistry

__all__ = [
    "ResolvedTools",
    "ToolNameResolver",
    "ToolPlan",
    "TurnTools",
    "as_resolver",
    "undeferred",
]

ResolvedTools: TypeAlias = Tool | Iterable[Tool] | None
ToolNameResolver: TypeAlias = Callable[
    [str, DispatchContext], ResolvedTools | Awaitable[ResolvedTools]
]
"""Maps an ``include_tools`` name to the tool(s) it stands for (one name may be a family whose
real names are known only at run time), or ``None`` when it knows no such name. May be async."""


def as_resolver(tools: Sequence[Tool] | ToolNameResolver) -> ToolNameResolver:
    """A resolver for a list of tools (by exact name), or ``tools`` itself if it is callable."""
    if callable(tools) and not isinstance(tools, Sequence):
        return tools
    by_name: dict[str, Tool] = {}
    for item in tools:
        if not isinstance(item, Tool):
            raise ConfigurationError(
                f"SkillsMiddleware(tools=...) takes plait tools (use @tool); got {item!r}."
            )
        if item.name in by_name:
            raise ConfigurationError(f"Two skill tools share the name {item.name!r}.")
        by_name[item.name] = item

    def resolve(name: str, ctx: DispatchContext) -> Tool | None:
        return by_name.get(name)

    return resolve


def undeferred(definition: ToolDefinition) -> ToolDefinition:
    """A copy of ``definition`` without ``defer_loading``, to advertise a deferred tool."""
    metadata = {k: v for k, v in definition.metadata.items() if k != "defer_loading"}
    return ToolDefinition(definition.name, definition.description, definition.parameters, metadata)


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """What one request shows: tools this middleware owns (registered) and deferred agent
    tools disclosed early (definitions only)."""

    owned: tuple[Tool, ...]
    deferred: tuple[ToolDefinition, ...]


@dataclass(slots=True, eq=False)
class TurnTools:
    """Per-turn bookkeeping against the turn's registry (rebuilt by the runtime every turn)."""

    registry: ToolRegistry
    owned: dict[str, Tool] = field(default_factory=dict)
    resolved: dict[str, tuple[Tool, ...]] = field(default_factory=dict)
    copies: dict[str, tuple[Tool, ToolDefinition]] = field(default_factory=dict)
    plan_key: tuple[object, ...] | None = None
    plan: ToolPlan = ToolPlan((), ())
    snapshot: SkillSnapshot | None = None
    """The snapshot of the turn's latest model call (what ``read_file`` reads against)."""
    listing: tuple[SkillSnapshot, str] | None = None
    """The turn's ranked list past the budget and the snapshot it was rendered from (computed
    on the turn's first model call, again only for a new snapshot)."""
    disclosed_for: Sequence[Message] | None = None
    """The message list the tools were last chosen for (``wrap_model_call`` compares it with
    the request it is handed, by identity)."""
    skills_of: dict[str, str] = field(default_factory=dict)
    """Each tool the plan shows because a skill lists it (registered, or a deferred agent tool
    disclosed), with the first disclosed skill that lists it (``PendingCall.skill``)."""

    def agent_tool(self, name: str) -> Tool | None:
        """The registry's tool called ``name`` if this middleware did not register it."""
        found = self.registry.get(name)
        return None if found is None or self.owned.get(name) is found else found

    async def plan_for(
        self,
        snapshot: SkillSnapshot,
        locations: tuple[str, ...],
        base: Sequence[Tool],
        resolver: ToolNameResolver,
        ctx: DispatchContext,
    ) -> ToolPlan:
        """The tools to show for ``locations``; cached while nothing it depends on changed."""
        key = (snapshot, locations, self.registry.version, tuple(base))
        if key == self.plan_key:
            return self.plan
        wanted: dict[str, Tool] = {t.name: t for t in base if self.agent_tool(t.name) is None}
        deferred: dict[str, ToolDefinition] = {}
        skills_of: dict[str, str] = {}
        for name, skills in _include_names(snapshot, locations).items():
            agent = self.agent_tool(name)
            candidates = (
                (agent,) if agent is not None else await self._resolve(name, skills, ctx, resolver)
            )
            for tool in candidates:
                owner = self.agent_tool(tool.name)
                if owner is None:
                    wanted.setdefault(tool.name, tool)
                elif owner.deferred:
                    deferred.setdefault(owner.name, self._copy(owner))
                else:
                    continue  # an agent tool visible anyway: the agent's, not the skill's
                skills_of.setdefault(tool.name, skills[0])
        self._apply(wanted)
        self.skills_of = skills_of
        self.plan = ToolPlan(tuple(self.owned.values()), tuple(deferred.values()))
        self.plan_key = (snapshot, locations, self.registry.version, tuple(base))
        return self.plan

    def _copy(self, tool: Tool) -> ToolDefinition:
        cached = self.copies.get(tool.name)
        if cached is None or cached[0] is not tool:
            cached = self.copies[tool.name] = (tool, undeferred(tool.definition))
        return cached[1]

    def _apply(self, wanted: dict[str, Tool]) -> None:
        """Unregister owned tools no longer wanted, register the new ones (a name an agent tool
        holds is left to it)."""
        for name, tool in list(self.owned.items()):
            if wanted.get(name) is not tool:
                self.registry.unregister(tool)
                del self.owned[name]
        for name, tool in wanted.items():
            if name not in self.owned and name not in self.registry:
                self.registry.register(tool)
                self.owned[name] = tool

    async def _resolve(
        self, name: str, skills: list[str], ctx: DispatchContext, resolver: ToolNameResolver
    ) -> tuple[Tool, ...]:
        cached = self.resolved.get(name)
        if cached is not None:
            return cached
        error: BaseException | None = None
        try:
            outcome = resolver(name, ctx)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            tools = _as_tools(outcome)
        except Exception as exc:  # a resolver is user code: report, keep the turn going
            error, tools = exc, ()
        if not tools:
            ctx.turn.emit(SkillToolUnresolved(name=name, skills=skills, error=error))
        self.resolved[name] = tools
        return tools


def _as_tools(outcome: ResolvedTools) -> tuple[Tool, ...]:
    if outcome is None:
        return ()
    if isinstance(outcome, Tool):
        return (outcome,)
    tools = tuple(outcome)
    for item in tools:
        if not isinstance(item, Tool):
            raise ConfigurationError(f"A skill tool resolver returned {item!r}, not a plait Tool.")
    return tools


def _include_names(snapshot: SkillSnapshot, locations: tuple[str, ...]) -> dict[str, list[str]]:
    """Each include name of the disclosed skills, with the skills that list it, in order."""
    names: dict[str, list[str]] = {}
    for location in locations:
        listed = snapshot.tools_by_location.get(location)
        if listed:
            skill = snapshot.by_location[location].name
            for name in listed:
                names.setdefault(name, []).append(skill)
    return names
