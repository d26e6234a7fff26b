"""``RunStream``: the events of one turn as an async iterator (``agent.stream``,
``agent.stream_resume``), and the task that drives its turn."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from plait.errors import ConfigurationError
from plait.messages import Message
from plait.middleware.context import Event
from plait.models.base import ModelSettings
from plait.runtime import storing
from plait.runtime.pause import Decision, OnPaused
from plait.runtime.resume import ResumedTurn
from plait.runtime.turn import RunResult, Turn

if TYPE_CHECKING:
    from plait.runtime.agent import Agent
    from plait.runtime.output import OutputRun

__all__ = ["RunStream"]

OutputT = TypeVar("OutputT", default=str)


class RunStream(Generic[OutputT]):
    """The events of one turn as an async iterator. After iteration ends, :attr:`result` holds
    the :class:`RunResult`; if the turn failed, iteration raises its error after yielding the
    error event.

    Leaving early cancels the turn. :meth:`aclose` (also through ``contextlib.aclosing``)
    returns once the turn has settled (its in-flight store write finished or given up). A plain
    ``break`` cannot wait, so the turn is cancelled the moment the iterator is dropped and the
    agent's next turn on that thread waits for it to settle, then for the thread's lease, before
    it loads the thread: both waits share one deadline,
    :data:`~plait.runtime.storing.SETTLE_TIMEOUT` (30 s), after which that turn raises
    :class:`~plait.errors.ThreadBusyError`.

    A turn that fails before it starts (a busy thread's :class:`~plait.errors.ThreadBusyError`,
    a store that cannot load the thread) is reported like any other failed turn: an
    :class:`~plait.runtime.events.ErrorOccurred` event (``where="turn"``, ``fatal=True``), then
    iteration raises the error.

    A stream runs its turn once: iterating it a second time raises
    :class:`~plait.errors.ConfigurationError` (call ``agent.stream(...)`` again for a new turn).
    """

    def __init__(
        self,
        agent: Agent[Any],
        input: list[Message],
        thread_id: str,
        state: dict[str, Any],
        model_settings: ModelSettings | None = None,
        output: OutputRun | None = None,
        *,
        on_paused: OnPaused = "raise",
        decisions: Mapping[str, Decision] | None = None,
    ) -> None:
        self._turn_args = (agent, thread_id, input, state, model_settings, output)
        self._on_paused: OnPaused = on_paused
        self._decisions = decisions
        self._iterated = False
        self._events: weakref.ref[_TurnEvents] | None = None
        self.thread_id = thread_id
        self.result: RunResult[OutputT] | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._iterated:
            raise ConfigurationError(
                "This RunStream was already iterated; it runs its turn once. "
                "Call agent.stream(...) again to run another turn."
            )
        self._iterated = True
        events = _TurnEvents(self, *self._turn_args)
        events._turn.on_paused = self._on_paused
        if self._decisions is not None:  # agent.stream_resume
            agent, thread_id, _, _, settings, output = self._turn_args
            events._turn = ResumedTurn(
                agent, thread_id, self._decisions, events._queue.put_nowait, True, settings, output
            )
        # A weak reference: the loop's iterator must be the only strong one, so a ``break``
        # drops it and cancels the turn at once.
        self._events = weakref.ref(events)
        return events

    async def aclose(self) -> None:
        """Cancel the turn if it still runs and return once it has settled; a no-op if the
        stream was never iterated or has finished. ``async with contextlib.aclosing(stream)``
        calls it on the way out of the block."""
        events = self._events() if self._events is not None else None
        if events is not None:
            await events.aclose()
        else:
            await self._turn_args[0]._settle(self.thread_id)


async def _drive(turn: Turn, queue: asyncio.Queue[Event | None]) -> RunResult[Any]:
    # A module-level function, not a method: the task must not keep the iterator alive, so that
    # dropping the iterator (a ``break``) cancels the turn at once.
    try:
        return await turn.run()
    finally:
        queue.put_nowait(None)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark an abandoned turn's outcome as seen (its error was already yielded as an event)."""
    if not task.cancelled():
        task.exception()


class _TurnEvents:
    """The iterator behind :class:`RunStream`: starts the turn on the first ``__anext__``."""

    def __init__(
        self,
        stream: RunStream[Any],
        agent: Agent[Any],
        thread_id: str,
        input: list[Message],
        state: dict[str, Any],
        model_settings: ModelSettings | None,
        output: OutputRun | None,
    ) -> None:
        self._stream = stream
        self._agent = agent
        self._thread_id = thread_id
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._turn = Turn(
            agent,
            thread_id,
            input,
            state,
            self._queue.put_nowait,
            streaming=True,
            model_settings=model_settings,
            output=output,
        )
        self._task: asyncio.Task[RunResult[Any]] | None = None
        self._events: list[Event] = []
        self._finished = False

    def __aiter__(self) -> _TurnEvents:
        return self

    async def __anext__(self) -> Event:
        if self._finished:
            raise StopAsyncIteration
        if self._task is None:
            self._turn.lease_deadline = await self._agent._settle(self._thread_id)
            self._task = asyncio.ensure_future(_drive(self._turn, self._queue))
        try:
            event = await self._queue.get()
        except BaseException:
            await self.aclose()
            raise
        if event is not None:
            self._events.append(event)
            return event
        self._finished = True
        result = await self._task
        result.events = self._events
        self._stream.result = result
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Cancel the turn if it still runs and wait until it has settled."""
        self._finished = True
        task = self._task
        if task is None:
            return
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=storing.SETTLE_TIMEOUT)
        if task.done():
            _retrieve(task)

    def __del__(self) -> None:
        task = self._task
        if task is None:
            return
        if task.done():
            _retrieve(task)
            return
        try:
            task.cancel()
        except RuntimeError:  # the event loop is already closed
            return
        task.add_done_callback(_retrieve)
        self._agent._unsettled_turn(self._thread_id, task)
