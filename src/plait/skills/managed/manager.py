"""``SkillManager``: skills with a lifecycle (the NHT ADK skills battery, in plait's terms).

*Initialized* is manager state - the skills loaded for this conversation, which survive turns.
*Projected* is per turn context - the initialized skills hydrated onto this turn's fresh
registry and ephemeral messages. The four hooks of :attr:`SkillManager.middleware` turn the first
into the second every turn (see :mod:`plait.skills.managed.hooks`).

One manager per conversation; sources may be shared between managers. Every mutation (load,
unload, refresh, swap, aclose) runs under one :class:`asyncio.Lock`. Load, unload and swap
*settle immediately*: manager state and the given context change before the call returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from plait.errors import clipped
from plait.middleware.context import DispatchContext, TurnContext
from plait.sandbox import KILL_GRACE_SECONDS
from plait.skills.catalog import SkillCatalog
from plait.skills.errors import SkillNotFound
from plait.skills.managed.errors import (
    ManagerError,
    SkillAlreadyLoaded,
    SkillManagerDisposed,
    SkillNotLoaded,
    SkillToolCollision,
    error_code,
)
from plait.skills.managed.events import (
    SkillLoaded,
    SkillSwapFailed,
    SkillSwapped,
    SkillUnloaded,
    SkillUpdateFound,
)
from plait.skills.managed.hooks import SkillMiddlewareSet, create_skill_middleware_set
from plait.skills.managed.prepare import Preparer, SkillTools
from plait.skills.managed.projection import ProjectionTable
from plait.skills.managed.records import (
    CatalogRefresh,
    Channel,
    LoadedSkill,
    LoadResult,
    ProjectedSkill,
    RefreshOutcome,
    SkillStatus,
)
from plait.skills.managed.scripts import ScriptConfig
from plait.skills.managed.tools import LIFECYCLE_TOOL_NAMES, Gate, SkillOwnedTool, lifecycle_tools
from plait.skills.model import SkillEntry
from plait.tools import Tool, ToolContext, ToolRegistry

if TYPE_CHECKING:
    from plait.skills.ranking import CatalogRanking, SkillRanker

__all__ = ["SkillManager"]

_MAX_LISTED = 20


def _turn(ctx: TurnContext | DispatchContext | None) -> TurnContext | None:
    return ctx.turn if isinstance(ctx, DispatchContext) else ctx


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_LISTED]) or "(none)"
    return shown + (f", and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else "")


class SkillManager:
    """Build one with :func:`create_skill_manager`. See the module docstring."""

    def __init__(
        self,
        catalog: SkillCatalog,
        *,
        gate: Gate,
        default_channel: Channel = "handle",
        scripts: ScriptConfig | None = None,
        auto_refresh: bool = False,
        skill_tools: SkillTools | None = None,
        close_timeout: float = 5.0,
        ranker: SkillRanker | None = None,
    ) -> None:
        self._catalog = catalog
        self.ranker = ranker
        self._ranking: CatalogRanking | None = None
        self.gate = gate
        self.default_channel: Channel = default_channel
        self.scripts = scripts
        self.auto_refresh = auto_refresh
        self.close_timeout = close_timeout
        self._owner = object()
        self._preparer = Preparer(catalog, skill_tools, scripts, gate, self._owner)
        self._records: dict[str, LoadedSkill] = {}
        self._lock = asyncio.Lock()
        self._table = ProjectionTable(self._owner)
        self._generation = 0
        self._closed = False
        self._tools: tuple[Tool, ...] = lifecycle_tools(self)
        self.middleware: SkillMiddlewareSet = create_skill_middleware_set(self)

    # --- queries -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def generation(self) -> int:
        """Bumped by every change of the initialized set (load, unload, swap, aclose)."""
        return self._generation

    def tools(self) -> tuple[Tool, ...]:
        """The lifecycle tools. The ``turn_input`` hook contributes them to every turn (through
        ``Middleware.tools()``), so there is nothing to add to the agent's tools."""
        return self._tools

    def catalog(self) -> list[SkillStatus]:
        """Every discovered skill, losing candidates included, with its load state."""
        loaded = {r.entry.ref: r for r in self._records.values()}
        out = []
        for entry in self._catalog.entries():
            record = loaded.get(entry.ref)
            out.append(
                SkillStatus(
                    entry.ref,
                    entry.name,
                    entry.description,
                    entry.version,
                    loaded=record is not None,
                    loaded_version=record.version if record else None,
                    update_available=bool(record and record.update_available),
                    shadowed_by=entry.shadowed_by,
                    model_invocable=entry.meta.model_invocable,
                )
            )
        return out

    def search(self, query: str, limit: int = 20) -> list[SkillStatus]:
        """The ``limit`` active, model-invocable skills most relevant to ``query``, best first,
        by ``ranker`` (default: a ``LexicalRanker``, built on first use)."""
        if self._ranking is None:
            from plait.skills.ranking import CatalogRanking  # only when someone searches

            self._ranking = CatalogRanking(self._catalog, self.ranker)
        statuses = {status.ref: status for status in self.catalog()}
        return [statuses[e.ref] for e in self._ranking.rank(query, limit) if e.ref in statuses]

    def loaded(self) -> list[str]:
        """The initialized skills (manager state; independent of any context), by name."""
        return list(self._records)

    def record(self, skill: str) -> LoadedSkill:
        """The initialized record of ``skill`` (name, id or ``source:id``); ``SkillNotLoaded``."""
        for record in self._records.values():
            if skill in (record.name, record.entry.id, str(record.entry.ref), record.handle):
                return record
        raise SkillNotLoaded(
            f"Skill not loaded: {clipped(skill)}. Loaded skills: {_listing(list(self._records))}."
        )

    def projected(self, ctx: TurnContext | DispatchContext) -> list[ProjectedSkill]:
        """The skills hydrated onto this context right now."""
        turn = _turn(ctx)
        projection = self._table.get(turn) if turn is not None else None
        return projection.describe() if projection is not None else []

    # --- lifecycle -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SkillManagerDisposed("The skill manager was closed (aclose()); create a new one.")

    def _resolve(self, skill: str, invoked_by_model: bool) -> SkillEntry:
        active = self._catalog.active()
        visible = [e for e in active if e.meta.model_invocable or not invoked_by_model]
        try:
            entry: SkillEntry | None = self._catalog.get(skill)
        except SkillNotFound:
            entry = next((e for e in active if skill in (e.id, str(e.ref))), None)
        if entry is None or entry not in visible:
            names = [e.name for e in visible]
            raise SkillNotFound(skill, names, hint="Call list_skills to see what can be loaded.")
        return entry

    def _check_collisions(
        self, record: LoadedSkill, registry: ToolRegistry | None, replacing: LoadedSkill | None
    ) -> None:
        taken = dict.fromkeys(LIFECYCLE_TOOL_NAMES, "a lifecycle tool of the skill manager")
        for other in self._records.values():
            if other is not replacing:
                taken.update(dict.fromkeys(other.tool_names, f"a tool of skill '{other.name}'"))
        for tool in record.tools:
            owner = taken.get(tool.name)
            existing = registry.get(tool.name) if registry is not None else None
            if owner is None and existing is not None:
                mine = isinstance(existing, SkillOwnedTool) and existing.owner is self._owner
                owner = None if mine else "a tool of the agent or of another middleware"
            if owner is not None:
                raise SkillToolCollision(
                    f"Skill '{record.name}' has a tool named '{tool.name}', but that name is "
                    f"taken by {owner}. Rename one of them; nothing was loaded."
                )

    async def load(
        self,
        skill: str,
        ctx: TurnContext | DispatchContext | None = None,
        *,
        channel: Channel | None = None,
        invoked_by_model: bool = False,
    ) -> LoadResult:
        """Initialize ``skill`` (a name, an id or ``source:id``) and project it onto ``ctx``.

        Settles immediately: the tools are registered on ``ctx``'s registry before this returns
        (they resolve for later calls of the same response, and are advertised from the next
        request on). Without ``ctx`` only manager state changes; the next turn hydrates it (and
        a clash with an agent tool then surfaces there, aborting that turn).
        ``invoked_by_model`` hides skills with ``disable-model-invocation``.
        """
        turn = _turn(ctx)
        async with self._lock:
            self._check_open()
            entry = self._resolve(skill, invoked_by_model)
            if entry.name in self._records:
                raise SkillAlreadyLoaded(
                    f"Skill already loaded: {entry.name} (version "
                    f"{self._records[entry.name].version}). Use refresh_skills for a new version."
                )
            record = await self._preparer.prepare(entry, channel or self.default_channel)
            try:
                self._check_collisions(record, turn.registry if turn else None, None)
                if turn is not None:
                    self._table.ensure(turn).project(record)
            except BaseException:
                record.release()
                raise
            self._records[record.name] = record
            self._generation += 1
        if turn is not None:
            turn.emit(
                SkillLoaded(
                    skill=record.name,
                    version=record.version,
                    tools=record.tool_names,
                    sandbox=self._sandbox_of(record),
                )
            )
        return LoadResult(
            record.name, record.version, record.channel, record.handle, record.tool_names
        )

    async def unload(self, skill: str, ctx: TurnContext | DispatchContext | None = None) -> str:
        """Retire ``skill``; return its name. Settles immediately on every live context: its
        tools are unregistered (a later call fails resolution), its body leaves
        ``ctx.ephemeral`` and this turn's reads of it become placeholders."""
        turn = _turn(ctx)
        async with self._lock:
            self._check_open()
            record = self.record(skill)
            del self._records[record.name]
            self._generation += 1
            self._unproject_everywhere(record)
            record.retire()
        if turn is not None:
            turn.emit(SkillUnloaded(skill=record.name, version=record.version))
        return record.name

    def _unproject_everywhere(self, record: LoadedSkill) -> None:
        for projection in self._table.live():
            if projection.skills.get(record.name) is record:
                projection.unproject(record.name)

    async def refresh(self, skill: str | None = None) -> CatalogRefresh:
        """Rediscover the sources (catalog only) and flag loaded skills whose source now has
        another version (``update_available``). Never swaps a loaded version."""
        async with self._lock:
            self._check_open()
            return (await self._refresh_catalog(skill))[0]

    async def _refresh_catalog(
        self, skill: str | None
    ) -> tuple[CatalogRefresh, list[tuple[LoadedSkill, str]]]:
        result = await self._catalog.refresh()
        if skill is not None and skill not in self._records:
            self._resolve(skill, invoked_by_model=False)
        newly: list[tuple[LoadedSkill, str]] = []
        for record in self._records.values():
            entry = self._catalog.find(record.entry.ref)
            newer = entry is not None and entry.version != record.version
            if newer and entry is not None and not record.update_available:
                newly.append((record, entry.version))
            record.update_available = newer
        flagged = tuple(
            r.name
            for r in self._records.values()
            if r.update_available and (skill is None or skill == r.name)
        )
        return CatalogRefresh(result.added, result.removed, result.changed, flagged), newly

    async def refresh_and_project(
        self, ctx: TurnContext | DispatchContext | None = None, skill: str | None = None
    ) -> list[RefreshOutcome]:
        """Rediscover, then swap ``skill`` (or every loaded skill) to its new version.

        Prepare-then-swap, per skill: the new version is prepared completely (body, tools,
        workspace, name checks) before anything changes; if that fails the old version stays
        loaded and projected and the outcome says why. The swap itself is synchronous: the old
        version leaves every live context, the new one is projected onto ``ctx``, and the old
        record is retired last.
        """
        turn = _turn(ctx)
        async with self._lock:
            self._check_open()
            await self._refresh_catalog(None)
            targets = [self.record(skill)] if skill is not None else list(self._records.values())
            return [await self._swap(old, turn) for old in targets]

    async def _swap(self, old: LoadedSkill, turn: TurnContext | None) -> RefreshOutcome:
        entry = self._catalog.find(old.entry.ref)
        if entry is not None and entry.version == old.version:
            old.update_available = False
            return RefreshOutcome(old.name, "unchanged", old.version, old.version)
        try:
            if entry is None:
                raise SkillNotFound(
                    str(old.entry.ref),
                    [str(e.ref) for e in self._catalog.active()],
                    where="its source any more",
                    hint="The loaded version stays; unload it if the skill was removed.",
                )
            new = await self._preparer.prepare(entry, old.channel)
            try:
                if new.name != old.name and new.name in self._records:
                    raise SkillAlreadyLoaded(f"Skill already loaded: {new.name}.")
                self._check_collisions(new, turn.registry if turn else None, old)
            except BaseException:
                new.release()
                raise
        except ManagerError as err:
            if turn is not None:
                turn.emit(SkillSwapFailed(skill=old.name, version=old.version, error=str(err)))
            failure = f"({error_code(err)}) {err}"
            return RefreshOutcome(old.name, "failed", old.version, error=failure)
        self._records = {
            (new.name if name == old.name else name): (new if r is old else r)
            for name, r in self._records.items()
        }
        self._generation += 1
        self._unproject_everywhere(old)
        if turn is not None:
            self._table.ensure(turn).project(new)
            turn.emit(
                SkillSwapped(skill=new.name, old_version=old.version, new_version=new.version)
            )
        old.retire()
        return RefreshOutcome(new.name, "swapped", old.version, new.version)

    def _sandbox_of(self, record: LoadedSkill) -> str | None:
        """The sandbox that runs ``record``'s scripts (None: the skill has no script tools)."""
        if self.scripts is None or record.workspace is None:
            return None
        return self.scripts.sandbox.name

    def read_body(self, handle: str, ctx: ToolContext) -> str:
        """The body behind ``handle`` (or a skill name), recorded as a read of this turn so it
        is kept out of the store and stripped at the end of the turn."""
        self._check_open()
        record = self.record(handle)
        projection = self._table.ensure(ctx.turn)
        if projection.skills.get(record.name) is not record:
            projection.project(record)
        projection.record_read(ctx.call.id, record)
        return (
            f'<skill_content name="{record.name}" version="{record.version}">\n'
            f"{record.body.strip()}\n</skill_content>"
        )

    async def aclose(self) -> None:
        """Drop every projection, retire every skill, wait (at most ``close_timeout``
        seconds) for in-flight skill tool calls, then kill leftover script process trees, wait
        (at most ``2 * KILL_GRACE_SECONDS``) until they are gone, and remove every workspace.
        Idempotent. Does not rely on any hook having run."""
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            records = list(self._records.values())
            self._records.clear()
            self._generation += 1
            for projection in self._table.live():
                projection.strip()
                self._table.drop(projection)
            for record in records:
                record.retire()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.close_timeout):
                for record in records:
                    await record.wait_idle()
        for record in records:
            record.release()
        for record in records:
            await record.wait_processes(2 * KILL_GRACE_SECONDS)

    # --- what the hooks call -------------------------------------------------------------------

    async def hydrate(self, ctx: TurnContext) -> None:
        """``turn_input``: with ``auto_refresh`` rediscover (catalog only), then project every
        initialized skill onto the fresh context."""
        if self.auto_refresh and not self._closed:
            async with self._lock:
                _, newly = await self._refresh_catalog(None)
            for record, version in newly:
                ctx.emit(
                    SkillUpdateFound(
                        skill=record.name, loaded_version=record.version, available_version=version
                    )
                )
        if self._records:
            self._table.ensure(ctx).reconcile(self._records, self._generation)

    def active_on(self, ctx: TurnContext) -> bool:
        """False when there is nothing to do for ``ctx``: no initialized skill and nothing
        projected (the dispatch hooks short-circuit then)."""
        if self._records:
            return True
        projection = self._table.get(ctx)
        return projection is not None and not projection.empty

    def reconcile(self, ctx: TurnContext) -> None:
        """``dispatch_input``: integrity repair before the request is built."""
        self._table.ensure(ctx).reconcile(self._records, self._generation)

    def observe(self, ctx: DispatchContext) -> None:
        """``dispatch_output``: keep body reads out of what is persisted next, reconcile."""
        projection = self._table.ensure(ctx.turn)
        projection.scrub_for_store(ctx.new_messages)
        projection.reconcile(self._records, self._generation)

    def strip(self, ctx: TurnContext) -> None:
        """``turn_output`` (head): remove everything projected onto ``ctx``."""
        projection = self._table.get(ctx)
        if projection is not None:
            projection.strip()
            self._table.drop(projection)
