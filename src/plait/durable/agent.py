"""``DurableAgent``: an :class:`~plait.Agent` whose turns run as DBOS workflows.

A turn is the workflow ``plait.durable.turn``; its thread load, every append, every model call
and every tool call are steps (:mod:`plait.durable.store`, :mod:`plait.durable.journal`). A
worker that dies mid-turn leaves the workflow ``PENDING``; a worker that launches DBOS with the
same executor id and application version (or that is told to recover the dead one's,
:func:`recover_turns`) runs it again: recorded steps return what they returned, the step in
flight runs again (once more at most), and the turn goes on from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plait.durable.codec import dump_run, load_run
from plait.durable.errors import DurabilityError
from plait.durable.journal import Journal
from plait.durable.sqlite_compat import sqlite_engine_kwargs
from plait.durable.store import JournaledStore
from plait.errors import ThreadBusyError
from plait.messages import dump_messages, load_messages, new_id
from plait.middleware.context import Event, EventSink
from plait.middleware.ordering import resolve_order
from plait.middleware.stack import MiddlewareStack
from plait.runtime.agent import Agent, RunInput, _as_messages
from plait.runtime.turn import RunResult, Turn

if TYPE_CHECKING:
    from dbos import DBOSConfig, WorkflowHandleAsync

__all__ = ["WORKFLOW_NAME", "DurableAgent", "dbos_config", "recover_turns"]

WORKFLOW_NAME = "plait.durable.turn"
RECOVER_TIMEOUT_S = 600.0
"""Default seconds :func:`recover_turns` waits for the recovered turns to finish."""

LEASE_ATTEMPTS = 3
"""Times a durable turn waits for its thread's lease (each wait the store's ``lease_wait``)
before it fails with ``ThreadBusyError``: a recovered turn may find the dead worker's lease
still unexpired (up to ``lease_ttl``, which by default equals ``lease_wait``)."""

_AGENTS: dict[str, DurableAgent] = {}
# Live event sinks of turns started in this process, by workflow id (a recovered turn has none).
_SINKS: dict[str, EventSink] = {}


def dbos_config(name: str, system_database_url: str | None = None, **more: Any) -> DBOSConfig:
    """A ``DBOSConfig`` for durable turns: the JSON serializer (never pickle) and the system
    database (``sqlite:///<name>.sqlite`` by default; pass the thread store's Postgres URL,
    ``postgresql://...``, for many workers). ``more`` goes into the config as given."""
    from dbos import DBOSPortableJSONSerializer

    url = system_database_url or f"sqlite:///{name}.sqlite"
    config: dict[str, Any] = {
        "name": name,
        "system_database_url": url,
        "serializer": DBOSPortableJSONSerializer(),
    }
    if url.startswith("sqlite"):  # an older SQLite under Python 3.12+ (plait.durable.sqlite_compat)
        engine_kwargs = sqlite_engine_kwargs(url)
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


@functools.cache
def _workflow() -> Callable[..., Any]:
    """The turn workflow, registered with DBOS on first use (before ``DBOS.launch()``: build
    every ``DurableAgent`` first, so a recovering worker knows the workflow)."""
    try:
        from dbos import DBOS, WorkflowSerializationFormat
    except ImportError as exc:  # pragma: no cover - the extra is installed in dev
        raise DurabilityError("Durable turns need DBOS: pip install 'plait[dbos]'.") from exc

    @DBOS.workflow(name=WORKFLOW_NAME, serialization_type=WorkflowSerializationFormat.PORTABLE)
    async def durable_turn(
        agent_name: str, thread_id: str, input_json: str, state_json: str, streaming: bool
    ) -> str:
        durable = _AGENTS.get(agent_name)
        if durable is None:
            raise DurabilityError(
                f"No DurableAgent named {agent_name!r} in this worker; build it (same name) "
                "before DBOS.launch() so its turns can be recovered here."
            )
        workflow_id = DBOS.workflow_id or ""
        emit = _SINKS.get(workflow_id, _drop)
        for attempt in range(LEASE_ATTEMPTS):
            turn = Turn(
                durable.agent,
                thread_id,
                load_messages(input_json),
                json.loads(state_json),
                emit,
                streaming=streaming,
            )
            try:
                result = await turn.run()
                break
            except ThreadBusyError:
                # Raised before the load, so no step was taken: waiting again is deterministic.
                # A recovered turn waits here for the dead worker's lease to expire.
                if attempt == LEASE_ATTEMPTS - 1:
                    raise
        return dump_run(
            result.output, result.thread_id, result.new_messages, result.usage, result.state
        )

    return durable_turn


def _drop(event: Event) -> None:
    """Where a recovered turn's events go: its caller is gone."""


class DurableAgent:
    """Runs ``agent``'s turns as DBOS workflows under ``name`` (unique per process; the
    recovering worker must build a DurableAgent of the same name, with the same tools and
    middleware, before ``DBOS.launch()``).

    The agent is copied, not changed: the copy has :class:`~plait.durable.journal.Journal`
    appended (innermost) and its store wrapped in a :class:`JournaledStore`. DBOS must be
    configured with a JSON serializer (:func:`dbos_config`) and launched before a turn runs.
    """

    def __init__(self, agent: Agent, *, name: str) -> None:
        if name in _AGENTS:
            raise DurabilityError(
                f"A DurableAgent named {name!r} exists already in this process; names pick "
                "the agent a recovered turn runs on, so each must be unique."
            )
        _workflow()
        durable = copy.copy(agent)
        durable._owned = []
        durable._unsettled = {}
        durable.middleware = MiddlewareStack(resolve_order([*agent.middleware, Journal()]))
        durable.store = JournaledStore(agent.store)
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
        """Run one durable turn and return its :class:`~plait.RunResult`.

        ``workflow_id`` names the workflow (default: a fresh one): running the same id again
        returns the first run's result instead of a second turn, in any process. ``emit``
        receives the turn's events live (deltas too, when set); they are also on the result.
        """
        from dbos import DBOS, SetWorkflowID

        _check_serializer()
        thread_id = thread_id or new_id()
        workflow_id = workflow_id or f"plait-turn-{new_id()}"
        events: list[Event] = []

        def sink(event: Event) -> None:
            events.append(event)
            if emit is not None:
                emit(event)

        messages = _as_messages(input)
        _SINKS[workflow_id] = sink
        try:
            with SetWorkflowID(workflow_id):
                handle = await DBOS.start_workflow_async(
                    _workflow(),
                    self.name,
                    thread_id,
                    dump_messages(messages),
                    json.dumps(dict(state or {})),
                    emit is not None,
                )
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
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        task = asyncio.ensure_future(
            self.run(
                input,
                thread_id=thread_id,
                state=state,
                workflow_id=workflow_id,
                emit=queue.put_nowait,
            )
        )
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
    pending = await DBOS.list_workflows_async(status=["PENDING", "ENQUEUED"], name=WORKFLOW_NAME)
    ids = sorted({h.get_workflow_id() for h in handles} | {w.workflow_id for w in pending})

    async def finished(workflow_id: str) -> None:
        handle: WorkflowHandleAsync[Any] = await DBOS.retrieve_workflow_async(workflow_id)
        with contextlib.suppress(Exception):  # a failed turn is finished too; its status says how
            await handle.get_result()

    async with asyncio.timeout(within):
        await asyncio.gather(*(finished(i) for i in ids))
    return ids
