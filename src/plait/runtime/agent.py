"""``Agent``: a model, tools, middleware and a thread store, run one turn at a time.

::

    agent = Agent(ScriptedModel(["Hello!"]), system_prompt="Be brief.")
    result = await agent.run("Hi", thread_id="t1")        # RunResult
    async for event in agent.stream("Again", thread_id="t1"):
        ...                                               # typed events, live
    agent.run_sync("Hi")                                  # from synchronous code

Every turn loads the thread from the store and writes back after each dispatch, so a turn that
fails or is cancelled leaves everything it had persisted intact.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plait.errors import ConfigurationError
from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    new_id,
)
from plait.middleware.base import Middleware
from plait.middleware.context import Event
from plait.middleware.stack import MiddlewareStack
from plait.models.base import Model
from plait.runtime.model_hooks import ModelHook
from plait.runtime.tool_search import ToolSearch
from plait.runtime.turn import RunResult, Turn
from plait.stores.base import ThreadStore
from plait.tools import Tool

__all__ = ["Agent", "Limits", "RunInput", "RunStream"]

RunInput = str | Message | Sequence[Message]


@dataclass(slots=True, frozen=True)
class Limits:
    """Bounds on one turn. ``model_calls_per_turn`` is the number of model calls before the turn
    ends with :class:`~plait.errors.LimitExceeded` (``kind="model_calls_per_turn"``; the same
    limit :class:`~plait.guards.LimitsMiddleware` can set lower, with an event);
    ``max_concurrent_tools`` bounds how many tool calls of one response run at once."""

    model_calls_per_turn: int = 50
    max_concurrent_tools: int = 8

    def __post_init__(self) -> None:
        if self.model_calls_per_turn < 1 or self.max_concurrent_tools < 1:
            raise ConfigurationError("Limits must be at least 1.")


def _as_messages(value: RunInput) -> list[Message]:
    if isinstance(value, str):
        return [UserMessage(value)]
    if isinstance(value, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
        return [value]
    return list(value)


class Agent:
    """An agent: ``model`` plus ``tools``, ``middleware`` (one ordered list, or a
    :class:`MiddlewareStack`), a ``system_prompt`` and a thread ``store`` (in memory by default;
    use :class:`~plait.stores.SQLiteThreadStore` to keep threads across processes).

    Deferred tools (``@tool(deferred=True)``) are registered but not advertised; when there are
    any, a :class:`~plait.runtime.tool_search.ToolSearch` is appended to the middleware (unless one
    was given) so the model can find them with ``search_tools``.

    ``model_hooks`` run after every model call (see :mod:`plait.runtime.model_hooks`); the
    default guards (tool-call validation, repetition detection) run first unless
    ``default_guards=False``.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        tools: Iterable[Tool] = (),
        middleware: Iterable[Middleware] | MiddlewareStack = (),
        system_prompt: str = "",
        store: ThreadStore | None = None,
        limits: Limits | None = None,
        model_name: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        model_hooks: Iterable[ModelHook] = (),
        default_guards: bool = True,
    ) -> None:
        if isinstance(model, str):
            from plait.models.registry import resolve_model

            self.model: Model = resolve_model(model)
        else:
            self.model = model
        self.tools: list[Tool] = list(tools)
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigurationError(f"Two agent tools share a name: {', '.join(duplicates)}.")
        self.middleware = MiddlewareStack(middleware)
        if any(t.deferred for t in self.tools) and not any(
            isinstance(m, ToolSearch) for m in self.middleware
        ):
            self.middleware.use(ToolSearch())
        self.system_prompt = system_prompt
        if store is None:
            from plait.stores.memory import MemoryThreadStore

            store = MemoryThreadStore()
        self.store: ThreadStore = store
        self.limits = limits or Limits()
        self.model_name = model_name
        self.temperature = temperature
        self.max_tokens = max_tokens
        guards: list[ModelHook] = []
        if default_guards:
            from plait.guards import default_model_hooks

            guards = default_model_hooks()
        self.model_hooks: list[ModelHook] = [*guards, *model_hooks]

    async def run(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run one turn and return its :class:`RunResult`.

        ``state`` updates the thread state before the turn starts (e.g. ``{"skills_metadata":
        None}`` to reload skills). Raises the turn's error (``TurnAborted``,
        ``DispatchRejected``, ``LimitExceeded``, a provider error, …) after persisting
        everything that completed.
        """
        events: list[Event] = []
        turn = Turn(
            self,
            thread_id or new_id(),
            _as_messages(input),
            dict(state or {}),
            events.append,
            streaming=False,
        )
        result = await turn.run()
        result.events = events
        return result

    def stream(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> RunStream:
        """Run one turn, yielding its events live (text deltas included); see :class:`RunStream`."""
        return RunStream(self, _as_messages(input), thread_id or new_id(), dict(state or {}))

    def run_sync(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """:meth:`run` for synchronous code (starts an event loop; not for use inside one)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input, thread_id=thread_id, state=state))
        raise ConfigurationError(
            "run_sync() was called inside a running event loop; use 'await agent.run(...)'."
        )


class RunStream:
    """The events of one turn as an async iterator. After iteration ends, :attr:`result` holds
    the :class:`RunResult`; if the turn failed, iteration raises its error after yielding the
    error event. Leaving the loop early (``break``) cancels the turn.

    A stream runs its turn once: iterating it a second time raises
    :class:`~plait.errors.ConfigurationError` (call ``agent.stream(...)`` again for a new turn).
    """

    def __init__(
        self, agent: Agent, input: list[Message], thread_id: str, state: dict[str, Any]
    ) -> None:
        self._turn_args = (agent, thread_id, input, state)
        self._iterated = False
        self.thread_id = thread_id
        self.result: RunResult | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._iterated:
            raise ConfigurationError(
                "This RunStream was already iterated; it runs its turn once. "
                "Call agent.stream(...) again to run another turn."
            )
        self._iterated = True
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        agent, thread_id, input, state = self._turn_args
        turn = Turn(agent, thread_id, input, state, queue.put_nowait, streaming=True)

        async def drive() -> RunResult:
            try:
                return await turn.run()
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(drive())
        events: list[Event] = []
        try:
            while (event := await queue.get()) is not None:
                events.append(event)
                yield event
            self.result = await task
            self.result.events = events
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            elif not task.cancelled():
                # Left early after the turn failed: its error was yielded as an event; mark it
                # retrieved so asyncio does not log "Task exception was never retrieved".
                task.exception()
