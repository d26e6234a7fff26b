"""Projection: which initialized skills are hydrated onto one turn context, and the mechanics of
putting them there and taking them away.

Per context it tracks the projected records (their tools in ``ctx.registry``, their body or
handle note in ``ctx.ephemeral``) and the *body reads* of the turn (``read_skill_body`` calls,
by tool call id). Bodies are never persisted:

* :meth:`Projection.scrub_for_store` replaces, in a dispatch's ``new_messages`` only, each body
  read's result with a new :class:`~plait.messages.ToolMessage` (same id, same tool call id)
  whose text is :func:`~plait.skills.managed.records.placeholder` - the store keeps an intact
  call/result pair, the live ``turn.messages`` keep the body for the rest of the turn;
* unloading (or swapping) a skill, and the final :meth:`Projection.strip`, put the placeholder
  into ``turn.messages`` too, and take the projected message out of ``ctx.ephemeral``.

State lives in ``ctx.scratch`` under the manager's :class:`ProjectionTable`, so the four hooks
(even built separately) share it and it dies with the context (the effect of a
``WeakKeyDictionary[TurnContext, ...]``, without a second table); the table also keeps a
:class:`weakref.WeakSet` of the live projections for ``aclose``. Each projection registers a
persist filter on its context, so body reads are replaced by placeholders in whatever is written:
dispatch messages, a summary in thread state, an offloaded history span.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping

from plait.messages import Message, ToolMessage
from plait.middleware.context import TurnContext
from plait.skills.managed.errors import SkillToolCollision
from plait.skills.managed.records import META_KEY, LoadedSkill, ProjectedSkill, placeholder
from plait.skills.managed.tools import SkillOwnedTool
from plait.tools import Tool

__all__ = ["BodyRead", "Projection", "ProjectionTable"]


class BodyRead:
    """One ``read_skill_body`` call of this turn: which record it read, and where the
    placeholder has been put so far."""

    __slots__ = ("live_omitted", "record", "stored_omitted")

    def __init__(self, record: LoadedSkill) -> None:
        self.record = record
        self.stored_omitted = False
        self.live_omitted = False


def _omitted(message: ToolMessage, skill: str) -> ToolMessage:
    return ToolMessage(
        message.tool_call_id,
        message.name,
        placeholder(skill),
        is_error=message.is_error,
        metadata={**message.metadata, META_KEY: {"skill": skill, "kind": "omitted"}},
        id=message.id,
    )


class Projection:
    """What one manager projected onto one turn context."""

    __slots__ = ("__weakref__", "ctx", "owner", "reads", "seen", "skills")

    def __init__(self, ctx: TurnContext, owner: object) -> None:
        self.ctx: TurnContext = ctx
        self.owner = owner
        self.skills: dict[str, LoadedSkill] = {}
        self.reads: dict[str, BodyRead] = {}
        self.seen: tuple[int, int] = (-1, -1)

    @property
    def empty(self) -> bool:
        return not self.skills and not self.reads

    def _owned(self, tool: Tool) -> bool:
        return isinstance(tool, SkillOwnedTool) and tool.owner is self.owner

    def _register(self, tool: Tool) -> None:
        registry = self.ctx.registry
        existing = registry.get(tool.name)
        if existing is tool:
            return
        if existing is not None and not self._owned(existing):
            raise SkillToolCollision(
                f"Skill tool {tool.name!r} cannot be projected: the name is taken by "
                f"{existing!r}, which is not a skill tool. Rename one of them."
            )
        registry.register(tool, replace=True)

    def project(self, record: LoadedSkill) -> None:
        """Hydrate ``record``: register its tools, add its body or handle note to ephemeral."""
        for tool in record.tools:
            self._register(tool)
        if not any(m is record.message for m in self.ctx.ephemeral):
            self.ctx.ephemeral.append(record.message)
        self.skills[record.name] = record

    def unproject(self, name: str) -> LoadedSkill | None:
        """Take skill ``name`` off this context: tools (by identity), its ephemeral message, and
        this turn's reads of its body (placeholders in ``turn.messages``)."""
        record = self.skills.pop(name, None)
        if record is None:
            return None
        for tool in record.tools:
            self.ctx.registry.unregister(tool)
        self._drop_message(record.message)
        self.omit_live(lambda read: read.record is record)
        return record

    def _drop_message(self, message: Message) -> None:
        ephemeral = self.ctx.ephemeral
        if any(m is message for m in ephemeral):
            ephemeral[:] = [m for m in ephemeral if m is not message]

    def reconcile(self, records: Mapping[str, LoadedSkill], generation: int) -> None:
        """Make this context match manager state: unproject what was unloaded or replaced,
        project what was loaded, re-assert what something else removed. Raises
        :class:`SkillToolCollision` when a foreign tool took a skill tool's name."""
        if self.seen != (generation, self.ctx.registry.version):
            for name, record in list(self.skills.items()):
                if records.get(name) is not record:
                    self.unproject(name)
            for record in records.values():
                self.project(record)
            self._sweep_stale_tools()
            self.seen = (generation, self.ctx.registry.version)
        self.omit_live(lambda read: self.skills.get(read.record.name) is not read.record)

    def _sweep_stale_tools(self) -> None:
        """Unregister this manager's skill tools that belong to no projected record (a stale
        handle re-registered, a retired version left behind)."""
        current = {id(t) for record in self.skills.values() for t in record.tools}
        for tool in self.ctx.registry:
            if self._owned(tool) and id(tool) not in current:
                self.ctx.registry.unregister(tool)

    def record_read(self, call_id: str, record: LoadedSkill) -> None:
        self.reads[call_id] = BodyRead(record)

    def filter_for_store(self, messages: list[Message]) -> list[Message]:
        """A ``TurnContext.persist_filters`` entry: a copy of ``messages`` with every body read
        of this turn replaced by its placeholder. Stateless, so it also serves later writers
        (a summary folded into thread state, an offloaded history span)."""
        reads = self.reads
        if not reads:
            return list(messages)
        return [
            _omitted(m, reads[m.tool_call_id].record.name)
            if isinstance(m, ToolMessage) and m.tool_call_id in reads
            else m
            for m in messages
        ]

    def scrub_for_store(self, new_messages: list[Message]) -> None:
        """Replace body reads among ``new_messages`` (what the runtime persists next) with
        placeholders; ``turn.messages`` keeps the originals until unload or strip."""
        pending = {cid: r for cid, r in self.reads.items() if not r.stored_omitted}
        if not pending:
            return
        for i, message in enumerate(new_messages):
            if isinstance(message, ToolMessage):
                read = pending.get(message.tool_call_id)
                if read is not None:
                    new_messages[i] = _omitted(message, read.record.name)
                    read.stored_omitted = True

    def omit_live(self, which: Callable[[BodyRead], bool]) -> None:
        """Replace, in ``turn.messages``, the results of the reads ``which`` selects."""
        chosen = {cid: r for cid, r in self.reads.items() if not r.live_omitted and which(r)}
        if not chosen:
            return
        messages = self.ctx.messages
        for i, message in enumerate(messages):
            if isinstance(message, ToolMessage):
                read = chosen.get(message.tool_call_id)
                if read is not None:
                    messages[i] = _omitted(message, read.record.name)
                    read.live_omitted = True

    def strip(self) -> None:
        """Remove everything projected: skill tools, ephemeral messages, body reads."""
        for name in list(self.skills):
            self.unproject(name)
        self._sweep_stale_tools()
        self.omit_live(lambda read: True)

    def describe(self) -> list[ProjectedSkill]:
        counts: dict[int, int] = {}
        for read in self.reads.values():
            counts[id(read.record)] = counts.get(id(read.record), 0) + 1
        return [
            ProjectedSkill(
                r.name, r.version, r.channel, r.handle, r.tool_names, counts.get(id(r), 0)
            )
            for r in self.skills.values()
        ]


class ProjectionTable:
    """Projection state of one manager, per turn context (kept in ``ctx.scratch``)."""

    __slots__ = ("_live", "owner")

    def __init__(self, owner: object) -> None:
        self.owner = owner
        self._live: weakref.WeakSet[Projection] = weakref.WeakSet()

    def get(self, ctx: TurnContext) -> Projection | None:
        found = ctx.scratch.get(self)
        return found if isinstance(found, Projection) else None

    def ensure(self, ctx: TurnContext) -> Projection:
        projection = self.get(ctx)
        if projection is None:
            projection = Projection(ctx, self.owner)
            ctx.scratch[self] = projection
            self._live.add(projection)
            # The runtime applies this before every write, even after a nack or an abort has
            # skipped dispatch_output: a body read never reaches the thread store.
            ctx.persist_filters.append(projection.filter_for_store)
        return projection

    def drop(self, projection: Projection) -> None:
        """Forget ``projection`` (after a strip); breaks the context ↔ projection cycle."""
        projection.ctx.scratch.pop(self, None)
        self._live.discard(projection)

    def live(self) -> list[Projection]:
        return list(self._live)
