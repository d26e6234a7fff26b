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
from collections.abc import Iterable, Mapping, Sequence
from types import UnionType
from typing import TYPE_CHECKING, Any, Generic, Self, overload

from typing_extensions import TypeVar

from plait.errors import ConfigurationError
from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    new_id,
)
from plait.middleware.base import SEAMS, Middleware
from plait.middleware.context import Event, EventSink
from plait.middleware.model_hooks import ModelHook, as_middleware
from plait.middleware.ordering import describe_order, resolve_order
from plait.middleware.stack import MiddlewareStack
from plait.models.base import Model, ModelSettings
from plait.runtime import storing
from plait.runtime.limits import DEFAULT_TOOL_TIMEOUT, Limits
from plait.runtime.output import (
    DEFAULT_OUTPUT_RETRIES,
    OutputMode,
    OutputRun,
    OutputValidator,
    resolve_mode,
    stored_output,
)
from plait.runtime.output_schema import OutputSpec
from plait.runtime.pause import Decision, OnPaused
from plait.runtime.repetition import RepetitionDetector
from plait.runtime.resume import ResumedTurn
from plait.runtime.stream import RunStream
from plait.runtime.tool_search import ToolSearch
from plait.runtime.turn import RunResult, Turn
from plait.runtime.validator import ToolCallValidator
from plait.stores.base import ThreadStore
from plait.tools import Tool

if TYPE_CHECKING:
    from plait.runtime.delegation import AgentTool, TreeLimits

__all__ = ["DEFAULT_TOOL_TIMEOUT", "Agent", "Limits", "RunInput", "RunStream"]

RunInput = str | Message | Sequence[Message]

OutputT = TypeVar("OutputT", default=str)
T = TypeVar("T")


def _as_messages(value: RunInput) -> list[Message]:
    if isinstance(value, str):
        return [UserMessage(value)]
    if isinstance(value, SystemMessage | UserMessage | AssistantMessage | ToolMessage):
        return [value]
    return list(value)


class Agent(Generic[OutputT]):
    """An agent: ``model`` plus ``tools``, ``middleware`` (one ordered list, or a
    :class:`MiddlewareStack`), a ``system_prompt`` and a thread ``store`` (in memory by default;
    use :class:`~plait.stores.SQLiteThreadStore` to keep threads across processes).

    Deferred tools (``@tool(deferred=True)``) are registered but not advertised; when there are
    any, or a middleware has a true ``defers_tools`` attribute (it registers deferred tools each
    turn, as ``McpToolset`` with a ``defer=True`` server does), a
    :class:`~plait.runtime.tool_search.ToolSearch` is appended to the middleware (unless one
    was given) so the model can find them with ``search_tools``.

    ``model_hooks`` are plain functions run after every model call, in the order given (see
    :mod:`plait.middleware.model_hooks`): sugar for middleware pinned outermost. The default
    guards (:class:`~plait.runtime.validator.ToolCallValidator`, then
    :class:`~plait.runtime.repetition.RepetitionDetector`) run before them unless
    ``default_guards=False``.

    ``model_settings`` (:class:`~plait.models.ModelSettings`: temperature, max_tokens,
    reasoning, provider extras) go into every request; they win over ``temperature`` and
    ``max_tokens`` given on their own, and a run's ``model_settings=`` wins over both
    (:mod:`plait.runtime.model_settings`).

    The middleware list is resolved once, here: pinned middleware move to their ends and every
    declared constraint is checked (:mod:`plait.middleware.ordering`); a broken one raises
    :class:`~plait.errors.ConfigurationError`. :meth:`describe` shows the result.

    ``output_type`` (default ``str``: the answer's text) makes ``RunResult.output`` a validated
    instance: a pydantic model, a dataclass, a ``TypedDict``, a union of those, a list or a
    scalar (:mod:`plait.runtime.output`). ``output_mode`` is ``"native"``, ``"tool"`` or
    ``"auto"``; ``output_retries`` (default 1) is how many invalid answers a turn sends back to
    the model before it raises :class:`~plait.errors.OutputValidationError`;
    :meth:`output_validator` adds checks of your own.

    The agent owns what it creates (a model resolved from a spec string, the default store) and
    closes it in :meth:`aclose` / ``async with``; everything passed in stays the caller's.
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
        model_hooks: Iterable[ModelHook | Middleware] = (),
        default_guards: bool = True,
        model_settings: ModelSettings | None = None,
        # OutputT defaults to str; a union (``A | B``) is typed by annotating the agent:
        # ``agent: Agent[A | B] = Agent(model, output_type=A | B)``.
        output_type: type[OutputT] | UnionType = str,  # type: ignore[assignment]
        output_mode: OutputMode = "auto",
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
    ) -> None:
        if output_retries < 0:
            raise ConfigurationError("output_retries must be 0 or more.")
        self.output_type: type[OutputT] | UnionType = output_type
        self.output_mode: OutputMode = output_mode
        self.output_retries = output_retries
        self._output_validators: list[OutputValidator] = []
        self._output_specs: dict[object, OutputSpec[Any]] = {}
        # What the agent creates it owns and closes in aclose(); what it is given, the caller does.
        self._owned: list[Model | ThreadStore] = []
        if isinstance(model, str):
            from plait.models.registry import resolve_model

            self.model: Model = resolve_model(model)
            self._owned.append(self.model)
        else:
            self.model = model
        self.tools: list[Tool] = list(tools)
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigurationError(f"Two agent tools share a name: {', '.join(duplicates)}.")
        if "final_result" in names and output_type is not str:
            raise ConfigurationError(
                "A tool is named 'final_result', the structured output's answer tool; rename it."
            )
        if output_type is not str:
            self._output_spec(output_type)  # a type pydantic cannot describe fails here
        guards: list[Middleware] = []
        if default_guards:
            guards = [ToolCallValidator(), RepetitionDetector()]
        hooks = [*guards, *model_hooks]
        for hook in hooks:
            if not callable(hook) and not isinstance(hook, Middleware):
                raise ConfigurationError(
                    f"model_hooks takes functions hook(response, ctx) or Middleware; got "
                    f"{type(hook).__name__}."
                )
        # MiddlewareStack checks every item is a Middleware before the order is resolved.
        chain = [*as_middleware(hooks), *MiddlewareStack(middleware)]
        defers = any(t.deferred for t in self.tools) or any(
            getattr(m, "defers_tools", False) for m in chain
        )  # a middleware that registers deferred tools each turn (McpToolset) says so
        if defers and not any(isinstance(m, ToolSearch) for m in chain):
            chain.append(ToolSearch())
        self.middleware = MiddlewareStack(resolve_order(chain))
        self.system_prompt = system_prompt
        if store is None:
            from plait.stores.memory import MemoryThreadStore

            store = MemoryThreadStore()
            self._owned.append(store)
        self.store: ThreadStore = store
        self.limits = limits or Limits()
        self.model_name = model_name
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.model_settings = model_settings
        self._unsettled: dict[str, asyncio.Task[Any]] = {}

    def as_tool(
        self,
        name: str,
        description: str,
        *,
        limits: TreeLimits | None = None,
        timeout: float | None = None,
    ) -> AgentTool:
        """This agent as a tool another agent's model calls with a ``task``: each call runs one
        turn on the thread ``<parent thread>/<call id>`` of the parent's store and answers with
        its final output (:mod:`plait.runtime.delegation`: events, usage, limits, errors).
        ``timeout`` (seconds) bounds each call instead of the parent's ``Limits.tool_timeout``."""
        from plait.runtime.delegation import AgentTool

        return AgentTool(self, name, description, limits=limits, timeout=timeout)

    def output_validator(self, fn: OutputValidator) -> OutputValidator:
        """Decorator: ``fn(output) -> output`` (sync or async) runs on every answer that
        validated against the output type, in the order added; raise
        :class:`~plait.errors.OutputRetry` with a reason the model reads to reject it."""
        self._output_validators.append(fn)
        return fn

    def _output_spec(self, output_type: object) -> OutputSpec[Any]:
        if isinstance(output_type, OutputSpec):
            return output_type
        spec = self._output_specs.get(output_type)
        if spec is None:
            spec = self._output_specs[output_type] = OutputSpec(output_type)
        return spec

    def _output_run(self, output_type: object | None) -> OutputRun | None:
        """The turn's structured-output state, or ``None`` for a text answer."""
        wanted = self.output_type if output_type is None else output_type
        if wanted is str:
            return None
        mode = resolve_mode(self.output_mode, self.model)
        spec = self._output_spec(wanted)
        return OutputRun(spec, mode, self.output_retries, self._output_validators)

    async def stored_output(self, thread_id: str, output_type: object | None = None) -> Any:
        """The thread's last structured answer, loaded from the store and validated again
        against ``output_type`` (default: the agent's); raises ``LookupError`` if it has none,
        ``ValueError`` if the stored answer no longer validates (a changed type)."""
        wanted = self.output_type if output_type is None else output_type
        snapshot = await self.store.load(thread_id)
        return stored_output(snapshot.messages, self._output_spec(wanted))

    def describe(self) -> str:
        """The resolved middleware order, one line each: position, name, pin, hooks overridden.

        Model hooks and default guards show first (pinned outermost: their ``after_model_call``
        runs last, so the last-listed of them runs first)."""
        return describe_order(list(self.middleware), SEAMS)

    async def aclose(self) -> None:
        """Close what the agent created: the model it resolved from a spec string (its HTTP
        client) and the in-memory store it made when none was given. A model, store, backend or
        middleware passed in belongs to the caller, who closes it. Idempotent."""
        owned, self._owned = self._owned, []
        for resource in owned:
            await resource.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _unsettled_turn(self, thread_id: str, task: asyncio.Task[Any]) -> None:
        """Remember a turn that was cancelled without anyone waiting for it to settle (a stream
        left with ``break``), so the next turn on its thread can wait for it."""
        self._unsettled[thread_id] = task

        def forget(done: asyncio.Task[Any]) -> None:
            if self._unsettled.get(thread_id) is done:
                del self._unsettled[thread_id]

        task.add_done_callback(forget)

    async def _settle(self, thread_id: str) -> float | None:
        """Wait (at most ``SETTLE_TIMEOUT`` seconds) for an abandoned turn on ``thread_id``.

        Returns the event-loop time by which the new turn must also have the thread's lease
        (the settle wait and the lease wait share one ``SETTLE_TIMEOUT`` deadline), or ``None``
        when no abandoned turn was running (the lease then waits its own ``lease_wait``)."""
        task = self._unsettled.get(thread_id)
        if task is None or task.done():
            return None
        within = storing.SETTLE_TIMEOUT  # read at each call, so setting it takes effect
        deadline = asyncio.get_running_loop().time() + within
        await asyncio.wait({task}, timeout=within)
        return deadline

    @overload
    async def run(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        on_paused: OnPaused = "raise",
        on_event: EventSink | None = None,
        output_type: None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    async def run(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        on_paused: OnPaused = "raise",
        on_event: EventSink | None = None,
        output_type: type[T] | OutputSpec[T],
    ) -> RunResult[T]: ...

    async def run(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        on_paused: OnPaused = "raise",
        on_event: EventSink | None = None,
        output_type: object | None = None,
    ) -> RunResult[Any]:
        """Run one turn and return its :class:`RunResult`. ``output_type`` overrides the
        agent's for this turn.

        A turn whose tool calls wait for a decision ends paused (``result.paused``, the calls in
        ``result.pending``; see :mod:`plait.runtime.pause`): continue it with :meth:`resume`.
        On a paused thread a new turn raises :class:`~plait.errors.ThreadPaused`, unless
        ``on_paused="reject"``: every held call is then answered with a rejection first.

        ``state`` updates the thread state before the turn starts (e.g. ``{"skills_metadata":
        None}`` to reload skills). ``model_settings`` go on top of the agent's for this turn's
        requests (:meth:`ModelSettings.merged`). Raises the turn's error (``TurnAborted``,
        ``DispatchRejected``, ``LimitExceeded``, a provider error, …) after persisting
        everything that completed. If the run is cancelled, the cancellation propagates once
        the turn's in-flight store write has settled (see :mod:`plait.runtime.storing`).

        ``on_event`` is called with each event as it happens, in the turn's task (the events of
        :meth:`stream`, text deltas included: the model is then streamed), without the task
        and queue a :class:`RunStream` adds; it must not block, and an error it raises ends
        the turn as the turn's error. ``result.events`` holds them too.
        """
        events: list[Event] = []
        thread_id = thread_id or new_id()
        deadline = await self._settle(thread_id)
        turn = Turn(
            self,
            thread_id,
            _as_messages(input),
            dict(state or {}),
            _sink(events, on_event),
            streaming=on_event is not None,
            model_settings=model_settings,
            output=self._output_run(output_type),
        )
        turn.lease_deadline = deadline
        turn.on_paused = on_paused
        result = await turn.run()
        result.events = events
        return result

    async def resume(
        self,
        thread_id: str,
        decisions: Mapping[str, Decision],
        *,
        model_settings: ModelSettings | None = None,
        on_event: EventSink | None = None,
    ) -> RunResult[OutputT]:
        """Continue the paused turn of ``thread_id`` with one decision per held call id
        (:class:`~plait.runtime.pause.Approve`, ``Reject``, ``Answer``), in any process on the
        same store; returns the turn's :class:`RunResult` (which may be paused again).

        Raises :class:`~plait.errors.DecisionError` (a held call without a decision, or an id
        that is not held), :class:`~plait.errors.ThreadNotPaused`, or
        :class:`~plait.errors.ResumeConflict` when another resume claimed the turn first; in
        each case nothing ran (see :mod:`plait.runtime.resume`). ``on_event`` as for :meth:`run`.
        """
        events: list[Event] = []
        deadline = await self._settle(thread_id)
        turn = ResumedTurn(
            self,
            thread_id,
            decisions,
            _sink(events, on_event),
            streaming=on_event is not None,
            model_settings=model_settings,
            output=self._output_run(None),
        )
        turn.lease_deadline = deadline
        result = await turn.run()
        result.events = events
        return result

    def stream_resume(
        self,
        thread_id: str,
        decisions: Mapping[str, Decision],
        *,
        model_settings: ModelSettings | None = None,
    ) -> RunStream[OutputT]:
        """:meth:`resume`, yielding the turn's events live (a :class:`RunStream`)."""
        return RunStream(
            self, [], thread_id, {}, model_settings, self._output_run(None), decisions=decisions
        )

    @overload
    def stream(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        on_paused: OnPaused = "raise",
        output_type: None = None,
    ) -> RunStream[OutputT]: ...

    @overload
    def stream(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        on_paused: OnPaused = "raise",
        output_type: type[T] | OutputSpec[T],
    ) -> RunStream[T]: ...

    def stream(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        on_paused: OnPaused = "raise",
        output_type: object | None = None,
    ) -> RunStream[Any]:
        """Run one turn, yielding its events live (text and reasoning deltas included, and
        :class:`~plait.runtime.output.OutputDeltaReceived` for a structured output); see
        :class:`RunStream`. ``model_settings``, ``on_paused`` and ``output_type`` as for
        :meth:`run`."""
        output = self._output_run(output_type)
        return RunStream(
            self,
            _as_messages(input),
            thread_id or new_id(),
            dict(state or {}),
            model_settings,
            output,
            on_paused=on_paused,
        )

    @overload
    def run_sync(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        output_type: None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    def run_sync(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        output_type: type[T] | OutputSpec[T],
    ) -> RunResult[T]: ...

    def run_sync(
        self,
        input: RunInput,
        *,
        thread_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        model_settings: ModelSettings | None = None,
        output_type: object | None = None,
    ) -> RunResult[Any]:
        """:meth:`run` for synchronous code (starts an event loop; not for use inside one)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            runner: Any = self.run  # the overloads above type the result
            run = runner(
                input,
                thread_id=thread_id,
                state=state,
                model_settings=model_settings,
                output_type=output_type,
            )
            result: RunResult[Any] = asyncio.run(run)
            return result
        raise ConfigurationError(
            "run_sync() was called inside a running event loop; use 'await agent.run(...)'."
        )


def _sink(events: list[Event], on_event: EventSink | None) -> EventSink:
    """Where a turn of :meth:`Agent.run` emits: ``events``, and ``on_event`` if given."""
    if on_event is None:
        return events.append

    def both(event: Event) -> None:
        events.append(event)
        on_event(event)

    return both
