"""``DurableAgent``: an :class:`~plait.Agent` whose turns run as DBOS workflows.

A turn is the workflow ``plait.durable.turn``; its thread load, every append, every model call
and every tool call are steps (:mod:`plait.durable.store`, :mod:`plait.durable.journal`). A
worker that dies mid-turn leaves the workflow ``PENDING``; a worker that launches DBOS with the
same executor id and application version (or that is told to recover the dead one's,
:func:`recover_turns`) runs it again: recorded steps return what they returned, the step in
flight runs again (once more at most), and the turn goes on from there.

A turn that pauses ends its workflow paused (nothing waits); :meth:`DurableAgent.resume` runs
the workflow ``plait.durable.resume``, one id per pause (the exactly-once claim), whose steps
are those of a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from plait.durable.codec import dump_decisions, dump_run, load_decisions, load_run
from plait.durable.errors import DurabilityError
from plait.durable.journal import InFlight, Journal
from plait.durable.sqlite_compat import sqlite_engine_kwargs
from plait.durable.store import JournaledStore
from plait.errors import ResumeConflict, ThreadBusyError, ThreadNotPaused
from plait.messages import dump_messages, load_messages, new_id
from plait.middleware.context import Event, EventSink
from plait.middleware.ordering import resolve_order
from plait.middleware.stack import MiddlewareStack
from plait.runtime import pause
from plait.runtime.agent import Agent, RunInput, _as_messages
from plait.runtime.pause import Decision
from plait.runtime.resume import DECISIONS_KEY, ResumedTurn, _check
from plait.runtime.turn import RunResult, Turn

if TYPE_CHECKING:
    from dbos import DBOSConfig, WorkflowHandleAsync

__all__ = ["RESUME_WORKFLOW_NAME", "WORKFLOW_NAME", "DurableAgent", "dbos_config", "recover_turns"]

WORKFLOW_NAME = "plait.durable.turn"
RESUME_WORKFLOW_NAME = "plait.durable.resume"
RECOVER_TIMEOUT_S = 600.0
"""Default seconds :func:`recover_turns` waits for the recovered turns to finish."""

LEASE_ATTEMPTS = 3
"""Times a durable turn waits for its thread's lease (each wait the store's ``lease_wait``)
before it fails with ``ThreadBusyError``: a recovered turn may find the dead worker's lease
still unexpired (up to ``lease_ttl``, which by default equals ``lease_wait``)."""

_AGENTS: dict[str, DurableAgent] = {}
# Live event sinks of turns started in this process, by workflow id (a recovered turn has none).
_SINKS: dict[str, EventSink] = {}


def dbos_config(
    name: str,
    system_database_url: str | None = None,
    *,
    sqlite_synchronous: str = "NORMAL",
    **more: Any,
) -> DBOSConfig:
    """A ``DBOSConfig`` for durable turns: the JSON serializer (never pickle) and the system
    database (``sqlite:///<name>.sqlite`` by default; pass the thread store's Postgres URL,
    ``postgresql://...``, for many workers). A SQLite system database runs in WAL mode with
    ``sqlite_synchronous`` (``"NORMAL"``: no sync per step, safe against the process dying;
    ``"FULL"`` for power loss too; see :mod:`plait.durable.sqlite_compat`). ``more`` goes into
    the config as given (a ``db_engine_kwargs`` there replaces plait's)."""
    from dbos import DBOSPortableJSONSerializer

    url = system_database_url or f"sqlite:///{name}.sqlite"
    config: dict[str, Any] = {
        "name": name,
        "system_database_url": url,
        "serializer": DBOSPortableJSONSerializer(),
    }
    if url.startswith("sqlite"):  # WAL, and an older SQLite (plait.durable.sqlite_compat)
        engine_kwargs = sqlite_engine_kwargs(url, sqlite_synchronous)
        if engine_kwargs:
            config["db_engine_kwargs"] = engine_kwargs
    config.update(more)
    return config  # type: ignore[return-value]


def _check_serializer() -> None:
    from dbos._dbos import _get_dbos_instance

    serializer = getattr(_get_dbos_instance(), "_serializer", None)
    if serializer is None or serializer.name() == "py_pickle":
        raise DurabilityError(
            "DBOS is configured with its pickle serializer; durable turns keep their journal "
            "in JSON. Build DBOS with plait.durable.dbos_config(...) or pass "
            "serializer=dbos.DBOSPortableJSONSerializer() in its config."
        )


async def _run_turn(agent_name: str, make: Callable[[DurableAgent, EventSink], Turn]) -> str:
    """The body of both workflows: the turn ``make`` builds, on the named agent, with the
    caller's live sink (none for a recovered turn), waiting out a dead worker's lease."""
    from dbos import DBOS

    durable = _AGENTS.get(agent_name)
    if durable is None:
        raise DurabilityError(
            f"No DurableAgent named {agent_name!r} in this worker; build it (same name) "
            "before DBOS.launch() so its turns can be recovered here."
        )
    emit = _SINKS.get(DBOS.workflow_id or "", _drop)
    for attempt in range(LEASE_ATTEMPTS):
        try:
            result = await make(durable, emit).run()
            break
        except ThreadBusyError:
            # Raised before the load, so no step was taken: waiting again is deterministic.
            # A recovered turn waits here for the dead worker's lease to expire.
            if attempt == LEASE_ATTEMPTS - 1:
                raise
    return dump_run(
        result.output,
        result.thread_id,
        result.new_messages,
        result.usage,
        result.state,
        result.pending,
    )


@functools.cache
def _workflows() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The turn and resume workflows, registered with DBOS on first use (before
    ``DBOS.launch()``: build every ``DurableAgent`` first, so a recovering worker knows them)."""
    try:
        from dbos import DBOS, WorkflowSerializationFormat
    except ImportError as exc:  # pragma: no cover - the extra is installed in dev
        raise DurabilityError("Durable turns need DBOS: pip install 'plait[dbos]'.") from exc

    portable = WorkflowSerializationFormat.PORTABLE

    @DBOS.workflow(name=WORKFLOW_NAME, serialization_type=portable)
    async def durable_turn(
        agent_name: str, thread_id: str, input_json: str, state_json: str, streaming: bool
    ) -> str:
        def make(durable: DurableAgent, emit: EventSink) -> Turn:
            return Turn(
                durable.agent,
                thread_id,
                load_messages(input_json),
                json.loads(state_json),
                emit,
                streaming=streaming,
            )

        return await _run_turn(agent_name, make)

    @DBOS.workflow(name=RESUME_WORKFLOW_NAME, serialization_type=portable)
    async def durable_resume(
        agent_name: str, thread_id: str, decisions_json: str, streaming: bool
    ) -> str:
        def make(durable: DurableAgent, emit: EventSink) -> Turn:
            agent = durable.agent
            decisions = load_decisions(decisions_json)
            output = agent._output_run(None)
            return ResumedTurn(agent, thread_id, decisions, emit, streaming, output=output)

        return await _run_turn(agent_name, make)

    return durable_turn, durable_resume


def _workflow() -> Callable[..., Any]:
    """The turn workflow (registering both workflows on first use)."""
    return _workflows()[0]


def _drop(event: Event) -> None:
    """Where a recovered turn's events go: its caller is gone."""


class DurableAgent:
    """Runs ``agent``'s turns as DBOS workflows under ``name`` (unique per process; the
    recovering worker must build a DurableAgent of the same name, with the same tools and
    middleware, before ``DBOS.launch()``).

    The agent is copied, not changed: the copy has :class:`~plait.durable.journal.Journal`
    appended (innermost) and its store wrapped in a :class:`JournaledStore`. DBOS must be
    configured with a JSON serializer (:func:`dbos_config`) and launched before a turn runs.

    ``in_flight`` says what a recovered turn does with a call of an ``idempotent=False`` tool
    that was running when its worker died: ``"pause"`` (the default: the turn pauses with that
    call pending, so it never runs again without a person's decision) or ``"error"`` (the
    model reads an error result saying it may or may not have taken effect, and the turn goes
    on unattended).
    """

    def __init__(self, agent: Agent, *, name: str, in_flight: InFlight = "pause") -> None:
        if name in _AGENTS:
            raise DurabilityError(
                f"A DurableAgent named {name!r} exists already in this process; names pick "
                "the agent a recovered turn runs on, so each must be unique."
            )
        _workflows()
        durable = copy.copy(agent)
        durable._owned = []
        durable._unsettled = {}
        journal = Journal(in_flight)
        durable.middleware = MiddlewareStack(resolve_order([*agent.middleware, journal]))
        durable.store = JournaledStore(agent.store)
        self.store = agent.store  # the thread store itself (the copy writes through a journal)
        self.agent = durable
        self.name = name
        _AGENTS[name] = self

    def close(self) -> None:
        """Forget this name (its pending turns can no longer recover in this process)."""
        _AGENTS.pop(self.name, None)

    async def run(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
        emit: EventSink | None = None,
    ) -> RunResult:
        """Run one durable turn and return its :class:`~plait.RunResult` (``result.paused``
        when it waits for decisions: continue it with :meth:`resume`, from any worker).

        ``workflow_id`` names the workflow (default: a fresh one): running the same id again
        returns the first run's result instead of a second turn, in any process. ``emit``
        receives the turn's events live (deltas too, when set); they are also on the result.
        """
        thread_id = thread_id or new_id()
        messages = _as_messages(input)
        args = (thread_id, dump_messages(messages), json.dumps(dict(state or {})))
        return await self._start(
            _workflows()[0], workflow_id or f"plait-turn-{new_id()}", args, emit, None
        )

    async def resume(
        self,
        thread_id: str,
        decisions: Mapping[str, Decision],
        *,
        emit: EventSink | None = None,
    ) -> RunResult:
        """Continue the paused turn of ``thread_id`` with one decision per held call, as
        ``Agent.resume``, as a DBOS workflow (``plait.durable.resume``) keyed by the pause: the
        resumed part's model and tool calls are steps, a crash mid-resume is recovered without
        re-running a completed call, and of two resumes of one pause (any processes) one runs
        and the other raises :class:`~plait.errors.ResumeConflict` having run nothing.

        Raises ``DecisionError`` / ``ThreadNotPaused`` / ``ResumeConflict`` before anything
        runs, as ``Agent.resume``. The result may be paused again."""
        snapshot = await self.store.load(thread_id)
        paused = pause.paused_dispatch(snapshot.state)
        version = snapshot.version
        if paused is None:
            if snapshot.state.get(DECISIONS_KEY):
                raise ResumeConflict(thread_id, version, version, " (it is already resumed)")
            raise ThreadNotPaused(thread_id)
        if paused.claimed is not None:
            raise ResumeConflict(
                thread_id, version, version, " (its resume is running or being recovered)"
            )
        _check(thread_id, paused, decisions)
        # One workflow per pause: DBOS's insert of this id is the claim two resumes race for.
        workflow_id = f"plait-resume:{self.name}:{thread_id}:{paused.dispatch}:{paused.paused_at!r}"
        args = (thread_id, dump_decisions(decisions))
        return await self._start(_workflows()[1], workflow_id, args, emit, (thread_id, version))

    async def _start(
        self,
        workflow: Callable[..., Any],
        workflow_id: str,
        args: tuple[str, ...],
        emit: EventSink | None,
        claim: tuple[str, int] | None,
    ) -> RunResult:
        """Start ``workflow`` as ``workflow_id`` on this agent, the caller's sink attached, and
        return its result. ``claim`` (a resume's thread and version): the id must be new, else
        ``ResumeConflict``."""
        from dbos import DBOS, SetWorkflowID
        from dbos._error import DBOSWorkflowIDInUseError

        _check_serializer()
        events: list[Event] = []

        def sink(event: Event) -> None:
            events.append(event)
            if emit is not None:
                emit(event)

        _SINKS[workflow_id] = sink
        try:
            policy: Literal["reject"] | None = "reject" if claim is not None else None
            try:
                with SetWorkflowID(workflow_id, workflow_id_reuse_policy=policy):
                    handle = await DBOS.start_workflow_async(
                        workflow, self.name, *args, emit is not None
                    )
            except DBOSWorkflowIDInUseError as exc:
                assert claim is not None
                thread_id, version = claim
                raise ResumeConflict(
                    thread_id, version, version, " (another resume of this pause started first)"
                ) from exc
            data = load_run(await handle.get_result())
        finally:
            _SINKS.pop(workflow_id, None)
        return RunResult(
            data["output"],
            data["thread_id"],
            data["new_messages"],
            data["usage"],
            data["state"],
            events,
            data["pending"],
        )

    async def stream(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        workflow_id: str | None = None,
    ) -> AsyncIterator[Event]:
        """The turn's events as they happen (text deltas included), then the iteration ends;
        the turn's error, if it failed, is raised after its events."""
        async for event in _streamed(
            lambda put: self.run(
                input, thread_id=thread_id, state=state, workflow_id=workflow_id, emit=put
            )
        ):
            yield event

    async def stream_resume(
        self, thread_id: str, decisions: Mapping[str, Decision]
    ) -> AsyncIterator[Event]:
        """:meth:`resume`, yielding its events live; its error is raised after its events."""
        async for event in _streamed(lambda put: self.resume(thread_id, decisions, emit=put)):
            yield event


async def _streamed(start: Callable[[EventSink], Awaitable[RunResult]]) -> AsyncIterator[Event]:
    queue: asyncio.Queue[Event | None] = asyncio.Queue()
    task = asyncio.ensure_future(start(queue.put_nowait))
    task.add_done_callback(lambda _t: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event
        await task
    finally:
        if not task.done():
            task.cancel()


async def recover_turns(
    executor_ids: Sequence[str] = ("local",), *, within: float = RECOVER_TIMEOUT_S
) -> list[str]:
    """Recover the pending durable turns of ``executor_ids`` (dead workers; ``"local"`` is the
    default executor id) on this worker and wait for all of them
    to finish (``within`` seconds, default :data:`RECOVER_TIMEOUT_S`, 600; then ``TimeoutError``).
    Returns their workflow ids. ``DBOS.launch()`` already recovers this worker's own
    executor id; this call is for taking over another's, and for waiting."""
    from dbos import DBOS

    handles = await asyncio.to_thread(DBOS._recover_pending_workflows, list(executor_ids))
    ids = {h.get_workflow_id() for h in handles}
    for name in (WORKFLOW_NAME, RESUME_WORKFLOW_NAME):
        pending = await DBOS.list_workflows_async(status=["PENDING", "ENQUEUED"], name=name)
        ids.update(w.workflow_id for w in pending)

    async def finished(workflow_id: str) -> None:
        handle: WorkflowHandleAsync[Any] = await DBOS.retrieve_workflow_async(workflow_id)
        with contextlib.suppress(Exception):  # a failed turn is finished too; its status says how
            await handle.get_result()

    async with asyncio.timeout(within):
        await asyncio.gather(*(finished(i) for i in ids))
    return sorted(ids)
