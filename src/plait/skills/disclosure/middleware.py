"""``SkillsMiddleware``: disclosure mode (see the package docstring and README.md).

Everything happens in ``before_model_call``, in this order:

1. **Load.** A thread without skills loaded, or whose ``skills_metadata`` state value is
   ``None`` (reset from the run input or any hook, mid-run included), refreshes the catalog from
   every source and takes the thread's snapshot. ``auto_refresh`` refreshes without a reset.
2. **Pin.** ``pinned_skills`` names become pinned-skill user messages (:mod:`.pins`).
3. **Disclose.** The request's messages are scanned (:mod:`.scan`) for SKILL.md reads and pins;
   the tools those skills list are registered and advertised, the others withdrawn
   (:mod:`.skill_tools`).
4. **Prompt.** The catalog section (rendered once per catalog generation) follows the system
   prompt.

Placement: after ``SummarizationMiddleware`` (and anything else that rewrites
``request.messages``), so what it scans is what the model will be sent. A middleware that
changes the messages *around* the call (``OverflowRecoveryMiddleware`` retrying with a compacted
request) is covered by ``wrap_model_call``, which repeats step 3 on the request it is handed.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError
from plait.middleware.base import Middleware, ModelHandler
from plait.middleware.context import DispatchContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse
from plait.skills.catalog import Precedence, SkillCatalog
from plait.skills.disclosure.events import (
    SkillCatalogLoaded,
    SkillProblemFound,
    SkillToolsDisclosed,
    SkillToolsWithdrawn,
)
from plait.skills.disclosure.listing import RankedListing
from plait.skills.disclosure.pins import PINNED_KEY, call_keeping_pins, pin_request
from plait.skills.disclosure.read_file import DEFAULT_READ_MAX_CHARS, build_read_tool
from plait.skills.disclosure.refresh import (
    DEFAULT_REFRESH_INTERVAL,
    DEFAULT_WAIT_S,
    CatalogRefresher,
)
from plait.skills.disclosure.scan import DisclosureScan
from plait.skills.disclosure.search import build_search_tool
from plait.skills.disclosure.skill_tools import ToolNameResolver, ToolPlan, TurnTools, as_resolver
from plait.skills.disclosure.snapshot import (
    DEFAULT_INSTRUCTIONS,
    DEFAULT_NAMES_SHARE,
    LoadProblem,
    SkillSnapshot,
    take_snapshot,
)
from plait.skills.render import PromptFormat
from plait.skills.sources.base import SkillSource
from plait.skills.sources.filesystem import FilesystemSource
from plait.tools import Tool, ToolContext

if TYPE_CHECKING:
    from plait.skills.ranking import SkillRanker

__all__ = ["DEFAULT_BUDGET", "DEFAULT_REFRESH_INTERVAL", "STATE_KEY", "SkillsMiddleware"]

STATE_KEY = "skills_metadata"
"""The thread-state key of the loaded skills' summary; set it to ``None`` to reload."""

DEFAULT_BUDGET = 8_000
"""Characters of the skill list in the system prompt (about 2,000 tokens)."""


def _problem_key(problem: LoadProblem) -> tuple[object, ...]:
    return (problem.source_id, problem.skill, problem.skipped, problem.diagnostic)


_MISSING: Any = object()


@dataclass(slots=True, eq=False)
class _Thread:
    snapshot: SkillSnapshot
    state_value: object
    loaded_at: float
    scan: DisclosureScan = field(default_factory=DisclosureScan)
    shown: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    prompt: tuple[str, str, str] | None = None


class SkillsMiddleware(Middleware):
    """Progressive disclosure of Agent Skills: catalog in the prompt, SKILL.md read on demand.

    ``sources`` are skill sources (a path means a :class:`FilesystemSource`); on a name
    collision the later source wins (``precedence``). ``tools`` is a list of skill tools or a
    :data:`ToolNameResolver`. ``budget`` bounds the skill list in characters (``None``: no
    bound); past it, ``search_skills`` finds the rest. ``instructions`` precede the list
    (``None``: the list alone). ``auto_refresh``: ``True`` refreshes the catalog incrementally
    before each turn's first model call, a number of seconds before any model call once that
    long has passed since the thread's last load. A new thread (or one this process forgot)
    is served the current catalog and never waits for a folder walk (only the very first load
    does, and the first after a background refresh its event loop ended before it finished, as
    with ``run_sync``): when the catalog is ``refresh_interval`` seconds old or more, it also
    starts one refresh in the background, shared by every thread (at most one runs at a time; it is
    bounded by each source's own scan limits; what a source reports lands as diagnostics, and
    an unexpected error is logged on the ``plait.skills`` logger and kept in
    :attr:`refresh_error`). ``refresh_interval=0`` instead refreshes before every new thread's
    first call, as a strict mode. A reset of ``skills_metadata`` always refreshes at once.
    Each loading problem (a skipped or warned skill, a failed source) is reported as one
    :class:`SkillProblemFound` by the first thread that loads it in this process, not again by
    every new thread; it is reported again once it was gone and comes back, and a reset of
    ``skills_metadata`` (the way to reload after editing a SKILL.md) reports every current
    problem. ``SkillCatalogLoaded.skipped`` counts the skipped skills on every load.
    Past the budget, the listed skills are chosen per user turn by
    relevance (:mod:`.listing`) with ``ranker`` (default: a
    :class:`~plait.skills.ranking.LexicalRanker`, built on first need), keeping pinned, read and
    ``always_listed`` skills; ``names_share`` of the budget (a quarter by default, ``0``: off)
    names the next skills without their descriptions, after the described ones.
    ``read_max_chars`` bounds one ``read_file`` result. Snapshots of
    at most ``max_threads`` threads are kept in memory (least recently used dropped; a dropped
    thread reloads on its next model call).
    """

    placement = Placement(after=("SummarizationMiddleware",))

    def __init__(
        self,
        sources: Sequence[SkillSource | str | os.PathLike[str]],
        *,
        tools: Sequence[Tool] | ToolNameResolver = (),
        precedence: Precedence = Precedence.LAST_WINS,
        budget: int | None = DEFAULT_BUDGET,
        format: PromptFormat = PromptFormat.MARKDOWN,
        instructions: str | None = DEFAULT_INSTRUCTIONS,
        auto_refresh: bool | float = False,
        read_max_chars: int = DEFAULT_READ_MAX_CHARS,
        max_threads: int = 1_000,
        ranker: SkillRanker | None = None,
        always_listed: Sequence[str] = (),
        refresh_interval: float = DEFAULT_REFRESH_INTERVAL,
        names_share: float = DEFAULT_NAMES_SHARE,
    ) -> None:
        if read_max_chars < 1000 or max_threads < 1 or (budget is not None and budget < 1):
            raise ConfigurationError(
                "SkillsMiddleware needs read_max_chars >= 1000, max_threads >= 1 and a "
                "positive budget (or budget=None)."
            )
        if ranker is not None and not all(
            callable(getattr(ranker, name, None)) for name in ("update", "rank")
        ):
            raise ConfigurationError(
                f"ranker must have update(entries) and rank(query, limit) methods (the "
                f"plait.skills.SkillRanker protocol); got {type(ranker).__name__}."
            )
        if not refresh_interval >= 0 or isinstance(always_listed, str):
            raise ConfigurationError(
                "SkillsMiddleware needs refresh_interval >= 0 (seconds; 0 refreshes for every "
                "new thread) and always_listed as a list of skill names, not one string."
            )
        if not 0 <= names_share < 1:
            raise ConfigurationError(
                f"SkillsMiddleware needs 0 <= names_share < 1 (the share of the budget that "
                f"names skills without descriptions; 0 turns it off); got {names_share!r}."
            )
        resolved = [s if isinstance(s, SkillSource) else FilesystemSource(s) for s in sources]
        self.catalog = SkillCatalog(resolved, precedence=precedence)
        self.budget = budget
        self.names_share = names_share
        self.format = PromptFormat(format)
        self.instructions = instructions
        self.auto_refresh = auto_refresh
        self._resolver = as_resolver(tools)
        self._threads: OrderedDict[str, _Thread] = OrderedDict()
        self._max_threads = max_threads
        self._snapshot: SkillSnapshot | None = None
        self._refresher = CatalogRefresher(self.catalog, refresh_interval)
        self._reported: set[tuple[object, ...]] = set()
        self._ranker = ranker
        self.always_listed = tuple(always_listed)
        self._listing: RankedListing | None = None
        self.read_tool = build_read_tool(
            self.catalog, self._tool_snapshot, max_chars=read_max_chars
        )
        self.search_tool = build_search_tool(self._tool_snapshot, self._ranked)

    @property
    def ranker(self) -> SkillRanker:
        """The ranker that orders the list past the budget and answers ``search_skills`` (the
        default :class:`~plait.skills.ranking.LexicalRanker` is built on first access)."""
        return self._ranked().ranker

    def _ranked(self) -> RankedListing:
        """The ranked listing, built (and the default ranker imported) on first need."""
        if self._listing is None:
            ranker = self._ranker
            if ranker is None:
                from plait.skills.ranking import LexicalRanker  # only past the budget

                ranker = LexicalRanker()
            self._listing = RankedListing(ranker, self.always_listed)
        return self._listing

    @property
    def refresh_interval(self) -> float:
        """Seconds a refreshed catalog serves new threads before one background refresh
        starts (``0``: every new thread refreshes first; see :mod:`.refresh`)."""
        return self._refresher.interval

    @refresh_interval.setter
    def refresh_interval(self, seconds: float) -> None:
        if not seconds >= 0:
            raise ConfigurationError(
                f"refresh_interval must be >= 0 seconds (0 refreshes for every new thread); "
                f"got {seconds!r}."
            )
        self._refresher.interval = seconds

    @property
    def refresh_error(self) -> Exception | None:
        """The last unexpected error of a background refresh; ``None`` once any refresh
        (background, strict, reset or ``auto_refresh``) succeeds after it."""
        return self._refresher.error

    async def wait_refreshed(self, deadline: float = DEFAULT_WAIT_S) -> bool:
        """Wait up to ``deadline`` seconds (default 30) for a background refresh in flight
        (for tests and an orderly shutdown); ``True`` when none is running any more. Does not
        cancel it when the deadline passes. One left in an event loop no longer running counts
        as not running."""
        return await self._refresher.wait(deadline)

    # --- public views -------------------------------------------------------------------------

    def snapshot(self, thread_id: str) -> SkillSnapshot | None:
        """The skills loaded for ``thread_id`` in this process, if any."""
        thread = self._threads.get(thread_id)
        return None if thread is None else thread.snapshot

    def disclosed_tools(self, thread_id: str) -> tuple[str, ...]:
        """Skill tools shown to the thread's latest model call (for other gating middleware)."""
        thread = self._threads.get(thread_id)
        return () if thread is None else thread.shown

    def skill_of(self, tool_name: str, ctx: DispatchContext) -> str | None:
        """The disclosed skill whose ``include_tools`` shows ``tool_name`` in this turn's latest
        request, or ``None`` (read by :mod:`plait.runtime.pause` for ``PendingCall.skill``)."""
        turn_tools: TurnTools | None = ctx.turn.scratch.get(self)
        return None if turn_tools is None else turn_tools.skills_of.get(tool_name)

    # --- the hook -----------------------------------------------------------------------------

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        turn_tools: TurnTools | None = ctx.turn.scratch.get(self)
        first_of_turn = turn_tools is None
        if turn_tools is None:  # the registry is rebuilt every turn: so is our bookkeeping
            turn_tools = ctx.turn.scratch[self] = TurnTools(ctx.registry)
        thread = await self._thread(ctx, first_of_turn)
        # The turn's tools read this snapshot, even if another thread evicts ours meanwhile.
        turn_tools.snapshot = thread.snapshot
        if ctx.state.get(PINNED_KEY) is not None:
            request = await pin_request(request, ctx, self.catalog, thread.snapshot, self)
        request = await self._disclose(request, ctx, thread, turn_tools)
        snapshot = thread.snapshot
        # Kept in the turn, not the thread: a thread evicted and reloaded mid-turn keeps its list.
        listing = turn_tools.listing
        if snapshot.overflowed and (listing is None or listing[0] is not snapshot):
            section = self._ranked().render(
                snapshot,
                request.messages,
                thread.scan.update(request.messages),
                format=self.format,
                budget=self.budget,
                instructions=self.instructions,
                names_share=self.names_share,
            )
            turn_tools.listing = (snapshot, section)
        return self._with_prompt(request, thread, turn_tools)

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        """Disclose again if the messages changed since ``before_model_call`` chose the tools.

        Middleware wrapping the call from outside (``OverflowRecoveryMiddleware``'s compacted
        retry) may send other messages than the ones scanned: a read it folded into a summary
        must withdraw its tools from that request too.
        """
        turn_tools: TurnTools | None = ctx.turn.scratch.get(self)
        thread = self._threads.get(ctx.turn.thread_id)
        if (
            turn_tools is not None
            and thread is not None
            and turn_tools.disclosed_for is not request.messages
        ):
            request = await self._disclose(request, ctx, thread, turn_tools)
        return await call_keeping_pins(request, ctx, call_next, self)

    async def _disclose(
        self, request: ModelRequest, ctx: DispatchContext, thread: _Thread, turn_tools: TurnTools
    ) -> ModelRequest:
        """Register and advertise the skill tools that ``request.messages`` disclose, withdraw
        the others (step 3)."""
        snapshot = thread.snapshot
        turn_tools.disclosed_for = request.messages
        if not snapshot.entries and not turn_tools.owned:
            return request
        scan = snapshot.tools_by_location or snapshot.overflowed
        locations = thread.scan.update(request.messages) if scan else ()
        base: tuple[Tool, ...] = ()
        if snapshot.entries:
            base = (self.read_tool, self.search_tool) if snapshot.overflowed else (self.read_tool,)
        before = tuple(turn_tools.owned)
        plan = await turn_tools.plan_for(snapshot, locations, base, self._resolver, ctx)
        self._report_tools(thread, plan, base, ctx)
        drop = {*before, *(t.name for t in plan.owned)}
        tools = [d for d in request.tools if d.name not in drop]
        tools.extend(t.definition for t in plan.owned)
        if plan.deferred:
            present = {d.name for d in tools}
            tools.extend(d for d in plan.deferred if d.name not in present)
        return request.replace(tools=tools)

    # --- loading ------------------------------------------------------------------------------

    async def _thread(self, ctx: DispatchContext, first_of_turn: bool) -> _Thread:
        thread_id = ctx.turn.thread_id
        value = ctx.state.get(STATE_KEY, _MISSING)
        thread = self._threads.get(thread_id)
        known = value is not None and value is not _MISSING
        if (
            thread is not None
            and known
            and (value is thread.state_value or thread.snapshot.matches(value))
        ):
            thread.state_value = value
            self._threads.move_to_end(thread_id)
            if self._refresh_due(thread, first_of_turn):
                await self._load(ctx, thread, "auto_refresh")
            return thread
        if value is None or value is _MISSING:
            reason = "first" if thread is None else "reset"
        else:
            reason = "restored"
        return await self._load(ctx, thread, reason)

    def _refresh_due(self, thread: _Thread, first_of_turn: bool) -> bool:
        every = self.auto_refresh
        if every is True:
            return first_of_turn
        if every is False:
            return False
        return time.monotonic() - thread.loaded_at >= every

    async def _load(self, ctx: DispatchContext, thread: _Thread | None, reason: str) -> _Thread:
        await self._refresher.refresh(force=reason in ("reset", "auto_refresh"))
        if self._snapshot is None or self._snapshot.generation != self.catalog.generation:
            self._snapshot = take_snapshot(
                self.catalog,
                format=self.format,
                budget=self.budget,
                instructions=self.instructions,
                names_share=self.names_share,
            )
        snapshot = self._snapshot
        previous = thread.snapshot if thread is not None else None
        thread_id = ctx.turn.thread_id
        if thread is not None and reason == "auto_refresh" and previous is snapshot:
            thread.loaded_at = time.monotonic()
            return thread
        summary = snapshot.summary
        ctx.state[STATE_KEY] = summary
        if thread is None:
            thread = _Thread(snapshot, summary, time.monotonic())
        else:
            thread.snapshot, thread.state_value = snapshot, summary
            thread.loaded_at = time.monotonic()
        self._threads[thread_id] = thread
        self._threads.move_to_end(thread_id)
        while len(self._threads) > self._max_threads:
            self._threads.popitem(last=False)
        self._report_load(ctx, snapshot, previous, reason)
        return thread

    def _report_load(
        self,
        ctx: DispatchContext,
        snapshot: SkillSnapshot,
        previous: SkillSnapshot | None,
        reason: str,
    ) -> None:
        thread_id = ctx.turn.thread_id
        added: list[str] = []
        removed: list[str] = []
        changed: list[str] = []
        if previous is not None and previous is not snapshot:  # a first load has nothing to diff
            old = {e.name: e.version for e in previous.entries}
            new = {e.name: e.version for e in snapshot.entries}
            added = [n for n in new if n not in old]
            removed = [n for n in old if n not in new]
            changed = [n for n, v in new.items() if old.get(n, v) != v]
        emit = ctx.turn.emit
        emit(
            SkillCatalogLoaded(
                thread_id=thread_id,
                reason=reason,
                skills=len(snapshot.entries),
                skipped=snapshot.skipped,
                added=added,
                removed=removed,
                changed=changed,
            )
        )
        reported, self._reported = self._reported, {_problem_key(p) for p in snapshot.problems}
        for problem in snapshot.problems:
            if reason != "reset" and _problem_key(problem) in reported:
                continue  # this process already reported it, and it has not gone away since
            emit(
                SkillProblemFound(
                    thread_id=thread_id,
                    source_id=problem.source_id,
                    skill=problem.skill,
                    diagnostic=problem.diagnostic,
                    skipped=problem.skipped,
                )
            )

    # --- pins, tools, prompt ------------------------------------------------------------------

    def _report_tools(
        self, thread: _Thread, plan: ToolPlan, base: tuple[Tool, ...], ctx: DispatchContext
    ) -> None:
        shown = tuple(t.name for t in plan.owned if t not in base)
        deferred = tuple(d.name for d in plan.deferred)
        if shown == thread.shown and deferred == thread.deferred:
            return
        added = [n for n in shown if n not in thread.shown]
        early = [n for n in deferred if n not in thread.deferred]
        removed = [n for n in thread.shown if n not in shown]
        if added or early:
            ctx.turn.emit(SkillToolsDisclosed(dispatch=ctx.index, tools=added, deferred=early))
        if removed:
            ctx.turn.emit(SkillToolsWithdrawn(dispatch=ctx.index, tools=removed))
        thread.shown, thread.deferred = shown, deferred

    def _with_prompt(
        self, request: ModelRequest, thread: _Thread, turn_tools: TurnTools
    ) -> ModelRequest:
        snapshot = thread.snapshot
        listing = turn_tools.listing
        section = listing[1] if listing is not None and listing[0] is snapshot else snapshot.section
        if not section:
            return request
        base = request.system_prompt
        cached = thread.prompt
        if cached is None or cached[1] is not section or cached[0] != base:
            text = f"{base}\n\n{section}" if base else section
            cached = thread.prompt = (base, section, text)
        return request.replace(system_prompt=cached[2])

    def _tool_snapshot(self, ctx: ToolContext) -> SkillSnapshot:
        turn_tools: TurnTools | None = ctx.turn.scratch.get(self)
        if turn_tools is not None and turn_tools.snapshot is not None:
            return turn_tools.snapshot
        thread = self._threads.get(ctx.turn.thread_id)
        if thread is None:
            raise ConfigurationError(
                "No skills are loaded for this thread; SkillsMiddleware loads them before the "
                "model call. Is the middleware in the agent's middleware list?"
            )
        return thread.snapshot
