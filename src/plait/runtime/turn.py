"""One turn, step by step, exactly as DESIGN.md "One turn" lays it out.

1. Load the thread; persist the new input before anything else runs.
2. Build a fresh ``ToolRegistry``, then the ``TurnContext``.
3. ``turn_input``; an abort ends the turn.
4. Dispatch loop: ``dispatch_input`` → build the request → model seams (model hooks and the
   default guards are ``after_model_call`` middleware) → tool calls → ``dispatch_output`` →
   persist the dispatch's messages. Until an answer without tool calls, or the dispatch limit.
5. ``turn_output`` (its head strips what middleware projected).
6. A :class:`RunResult`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from plait.errors import (
    DispatchRejected,
    LimitExceeded,
    ProviderError,
    StoreTimeoutError,
    ThreadConflictError,
    TurnAborted,
)
from plait.history import History, request_messages
from plait.messages import Message, ToolCall, ToolMessage, Usage
from plait.middleware.context import DispatchContext, Event, EventSink, TurnContext
from plait.middleware.stack import MiddlewareStack
from plait.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ReasoningDelta,
    ResponseComplete,
    TextDelta,
)
from plait.models.timeouts import agent_deadline
from plait.runtime import pause, storing
from plait.runtime.events import (
    DispatchFinished,
    ErrorOccurred,
    ModelRequestSent,
    ModelResponseReceived,
    ReasoningDeltaReceived,
    TextDeltaReceived,
    TurnFinished,
    TurnStarted,
)
from plait.runtime.model_settings import dropped_reasoning, turn_settings
from plait.runtime.pause import PendingCall
from plait.runtime.responses import (
    checked_response,
    checking,
    report_retries,
    with_unique_call_ids,
)
from plait.runtime.storing import (
    append_storable,
    storable_input,
    storable_response,
    swap_written,
    unanswered_repeat,
)
from plait.runtime.tool_calls import results_after_cancel, run_tool_calls
from plait.storable import storable_text
from plait.stores.lease import lease_within, thread_lease
from plait.tools import ToolRegistry

if TYPE_CHECKING:
    from plait.runtime.agent import Agent
    from plait.runtime.output import OutputRun

__all__ = ["RunResult", "Turn"]

OutputT = TypeVar("OutputT", default=str)


@dataclass(slots=True)
class RunResult(Generic[OutputT]):
    """What a turn produced: the final answer (the text, or the validated instance of the
    output type), the messages it added, usage and events."""

    output: OutputT
    thread_id: str
    new_messages: list[Message]
    usage: Usage
    state: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    pending: list[PendingCall] = field(default_factory=list)
    """The calls the turn paused on (empty unless it paused): decide each, then
    ``agent.resume(thread_id, decisions)``."""

    @property
    def paused(self) -> bool:
        return bool(self.pending)


def _aborted(error: BaseException | None) -> TurnAborted:
    """The exception an aborted turn raises: a ``TurnAborted`` reason (e.g. ``LimitExceeded``)
    as it is, anything else wrapped in ``TurnAborted``."""
    if isinstance(error, TurnAborted):
        return error
    return TurnAborted(error or RuntimeError("aborted"))


class Turn:
    """Runs one turn of ``agent`` on a thread. Create one per ``run``; not reusable."""

    def __init__(
        self,
        agent: Agent[Any],
        thread_id: str,
        input: Sequence[Message],
        state: dict[str, Any] | None,
        emit: EventSink,
        streaming: bool,
        model_settings: ModelSettings | None = None,
        output: OutputRun | None = None,
    ) -> None:
        self.agent = agent
        self.output = output  # a structured output's state (plait.runtime.output), or None
        # What every request of the turn carries (see plait.runtime.model_settings).
        self.settings = turn_settings(
            agent.temperature, agent.max_tokens, agent.model_settings, model_settings
        )
        self.stack: MiddlewareStack = agent.middleware
        self.thread_id = thread_id
        # What the input needed replaced is reported right after TurnStarted.
        self._input_events: list[Event] = []
        self.input = storable_input(input, self._input_events.append)
        self.state_update = state or {}
        self.emit = emit
        self.streaming = streaming
        self.version = 0
        self.new_messages: list[Message] = list(self.input)
        # Set by the agent when this turn's wait began by settling an abandoned turn: the lease
        # must then be had by this event-loop time (one deadline for the whole wait).
        self.lease_deadline: float | None = None
        self.on_paused: pause.OnPaused = "raise"  # a paused thread: raise, or reject its calls
        self._started = False

    async def run(self) -> RunResult[Any]:
        # The store's turn lease (if it has one) is held before the thread is even loaded.
        store, thread_id = self.agent.store, self.thread_id
        if self.lease_deadline is None:
            lease = thread_lease(store, thread_id)
        else:
            lease = lease_within(store, thread_id, self.lease_deadline, storing.SETTLE_TIMEOUT)
        try:
            async with lease:
                return await self._run()
        except Exception as exc:
            if not self._started:  # a busy lease, a failed load: reported like a failed turn
                self.emit(ErrorOccurred(error=exc, where="turn", fatal=True))
            raise

    async def _run(self) -> RunResult[Any]:
        ctx = await self._start()
        self._started = True
        try:
            await self.stack.run_turn_input(ctx)
            if ctx.aborted:
                raise _aborted(ctx.error)
            output = await self._dispatch_loop(ctx)
            pending = pause.pending_calls(ctx)
            if pending is not None:  # turn_output runs once, when the resumed turn ends
                self._finalize(ctx, None)
                return RunResult(
                    "", self.thread_id, self.new_messages, ctx.usage, ctx.state, [], pending
                )
            await self.stack.run_turn_output(ctx)
            if ctx.aborted:
                raise _aborted(ctx.error)
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.emit(ErrorOccurred(error=exc, where="turn", fatal=True))
                await self._save_state(ctx, exc)
            self._finalize(ctx, exc)
            raise
        self.emit(TurnFinished(output=output, usage=ctx.usage))
        self._finalize(ctx, None)
        value = output if self.output is None else self.output.value
        return RunResult(value, self.thread_id, self.new_messages, ctx.usage, ctx.state)

    def _finalize(self, ctx: TurnContext, error: BaseException | None) -> None:
        """Run ``ctx.finalizers``, last registered first; one that raises is reported and the
        rest still run."""
        while ctx.finalizers:
            finalizer = ctx.finalizers.pop()
            try:
                finalizer(error)
            except Exception as exc:
                self.emit(ErrorOccurred(error=exc, where="finalizer"))

    async def _save_state(self, ctx: TurnContext, error: Exception) -> None:
        """After a failure, persist the thread state as middleware left it (best effort).

        Messages of the failed dispatch are not written (pairs stay intact); the state is, so
        bookkeeping such as a consumed ``pinned_skills`` or a model-call count is not replayed.
        """
        if isinstance(error, ThreadConflictError | StoreTimeoutError):
            return  # a stale version, or a store that just gave no answer: no second wait
        try:
            await self._append([], ctx.state)
        except Exception as exc:
            self.emit(ErrorOccurred(error=exc, where="save_state"))

    async def _start(self) -> TurnContext:
        store = self.agent.store
        snapshot = await store.load(self.thread_id)
        state = snapshot.state
        state.update(self.state_update)
        self.version = snapshot.version
        history = await pause.settle_before_turn(self, snapshot.messages, state, self.on_paused)
        repeated = unanswered_repeat(history, self.input)
        if repeated is None:
            self.input = await self._append(self.input, state)
        else:  # a retry of a turn that failed unanswered: its input is stored already
            history = history[: len(history) - len(repeated)]
            self.input = repeated
            if self.state_update:
                await self._append([], state)
        self.new_messages = list(self.input)
        return self._context(history, state)

    def _context(self, history: list[Message], state: dict[str, Any]) -> TurnContext:
        """The turn's fresh registry and context on ``history`` + the input; emits
        ``TurnStarted``."""
        registry = ToolRegistry(self.agent.tools)
        for m in self.stack:
            for t in m.tools():
                if t.name not in registry:
                    registry.register(t)
        for t in self.output.tools() if self.output is not None else ():
            registry.register(t, replace=True)
        ctx = TurnContext(
            thread_id=self.thread_id,
            registry=registry,
            model=self.agent.model,
            messages=History([*history, *self.input]),
            state=state,
            system_prompt=self.agent.system_prompt,
            input=self.input,
            emit=self.emit,
            streaming=self.streaming,
            store=self.agent.store,
        )
        self.emit(TurnStarted(thread_id=self.thread_id, input=self.input))
        for event in self._input_events:
            self.emit(event)
        report_retries(ctx)  # last: from here on, the turn's finalizers run however it ends
        return ctx

    async def _dispatch_loop(self, ctx: TurnContext) -> str:
        limit = self.agent.limits.model_calls_per_turn
        while True:
            if ctx.dispatch_count >= limit:
                raise LimitExceeded(
                    "model_calls_per_turn",
                    limit,
                    f"The turn reached its limit of {limit} model calls without a final answer. "
                    "Raise Limits(model_calls_per_turn=...) or check the tools for a loop; "
                    "every message so far is persisted and the thread stays valid.",
                )
            d = DispatchContext(ctx, ctx.dispatch_count)
            ctx.dispatch_count += 1
            response = await self._dispatch(d)
            if pause.pending_calls(ctx) is not None:  # paused: resumed by agent.resume
                return response.content
            if self.output is not None:
                if self.output.finished():  # raises OutputValidationError past the retries
                    return self.output.raw
            elif not response.tool_calls:
                return response.content

    def _check(self, d: DispatchContext) -> None:
        if d._error is None and d.turn._error is None:
            return
        if d.turn.aborted:
            raise _aborted(d.turn.error)
        if d.nacked:
            error = d.error or RuntimeError("nacked")
            raise error if isinstance(error, TurnAborted) else DispatchRejected(error, d.index)

    def build_request(self, ctx: TurnContext) -> ModelRequest:
        settings = self.settings
        request = ModelRequest(
            # O(1): a snapshot of the history, not a copy (see plait.history)
            messages=request_messages(ctx.messages, ctx.ephemeral),
            tools=ctx.registry.definitions(),
            system_prompt=ctx.system_prompt,
            model=self.agent.model_name,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            call_class="agent",
            reasoning=settings.reasoning,
            extra=settings.extra,
            # what the adapters' prompt caching reads (plait.models.prompt_cache)
            metadata={"thread_id": ctx.thread_id, "projected_messages": len(ctx.ephemeral)},
        )
        return request if self.output is None else self.output.request(request)

    async def _dispatch(self, d: DispatchContext) -> ModelResponse:
        ctx, stack = d.turn, self.stack
        if stack.has_dispatch_input:
            await stack.run_dispatch_input(d)
            self._check(d)
        request = self.build_request(ctx)
        if stack.has_before_model_call:
            request = await stack.run_before_model_call(request, d)
            self._check(d)
        d.request = request
        self.emit(ModelRequestSent(dispatch=d.index, request=request))
        # Once per turn: a turn's own model calls add only their provider's reasoning.
        provider = getattr(ctx.model, "reasoning_provider", None) if d.index == 0 else None
        if provider is not None:
            for dropped in dropped_reasoning(request, provider, d.index):
                self.emit(dropped)
        handler, wrapped = self._model_handler(d), stack.has_wrap_model_call
        if wrapped:  # what the model returned is checked before any middleware sees it
            handler = stack.wrap_model(checking(handler, ctx.model), d)
        response = checked_response(await handler(request), ctx.model, wrapped=wrapped)
        response = with_unique_call_ids(response)
        if stack.has_after_model_call:
            response = await stack.run_after_model_call(response, request, d)
            self._check(d)
        response = storable_response(with_unique_call_ids(response), self.emit)
        d.response = response
        ctx.usage = ctx.usage + response.usage
        assistant = response.to_message()
        d.add_message(assistant)
        self.emit(ModelResponseReceived(dispatch=d.index, message=assistant))
        if response.tool_calls:
            results = await self._run_tools(response.tool_calls, d)
            if pause.held_calls(d):
                await pause.pause_dispatch(self, d, results)
                return response
            for message in results:
                d.add_message(message)
        await self._finish_dispatch(d, response)
        return response

    async def _finish_dispatch(self, d: DispatchContext, response: ModelResponse) -> None:
        """The output's judgement, followups, ``dispatch_output``, then the dispatch's messages
        persisted."""
        ctx, stack = d.turn, self.stack
        if self.output is not None:  # judges the answer, adds a retry prompt when one is due
            await self.output.settle(response, d)
        for followup in d.followups:
            d.add_message(followup)
        if stack.has_dispatch_output:
            try:
                await stack.run_dispatch_output(d)
            except asyncio.CancelledError:
                await self._persist_cancelled(list(d.new_messages), d)
                raise
        persisted = list(d.new_messages)
        for keep_out in ctx.persist_filters:
            persisted = keep_out(persisted)
        written = await self._append(persisted, ctx.state)
        if written is not persisted:  # the store took storable copies: so does the turn
            swap_written(ctx.messages, persisted, written)
            persisted = written
        self.new_messages.extend(persisted)
        self.emit(DispatchFinished(dispatch=d.index, messages=persisted, usage=response.usage))
        self._check(d)

    async def _run_tools(self, calls: list[ToolCall], d: DispatchContext) -> list[ToolMessage]:
        """Run the calls. If the turn is cancelled meanwhile, the dispatch so far (the call and
        a result for every call, finished or cancelled) is persisted before the cancellation
        goes on: tools that ran are never forgotten, so a retry does not repeat them blindly."""
        limits = self.agent.limits
        finished: dict[str, ToolMessage] = {}
        try:
            return await run_tool_calls(
                calls,
                d,
                self.stack,
                limits.max_concurrent_tools,
                tool_timeout=limits.tool_timeout,
                finished=finished,
            )
        except asyncio.CancelledError:
            await self._persist_cancelled(
                [*d.new_messages, *results_after_cancel(calls, finished)], d
            )
            raise

    async def _persist_cancelled(self, messages: list[Message], d: DispatchContext) -> None:
        """Persist what a cancelled dispatch produced (through the persist filters) before the
        cancellation goes on; a store error is reported, the cancellation is what the caller
        sees."""
        try:
            for keep_out in d.turn.persist_filters:
                messages = keep_out(messages)
            self.new_messages.extend(await self._append(messages, d.turn.state))
        except Exception as exc:
            self.emit(ErrorOccurred(error=exc, where="persist_cancelled_dispatch"))

    async def _append(self, messages: list[Message], state: dict[str, Any]) -> list[Message]:
        """Write at the current version and move ``self.version`` on; values a store cannot
        encode are replaced, not fatal (see :mod:`plait.runtime.storing`). Returns the messages
        as written (``messages`` itself unless something was replaced), for the caller to see
        what the store holds."""
        self.version, written = await append_storable(
            self.agent.store,
            self.thread_id,
            messages,
            expected_version=self.version,
            state=state,
            emit=self.emit,
        )
        return written

    def _model_handler(self, d: DispatchContext) -> Any:
        model = d.turn.model
        if not self.streaming:
            return agent_deadline(model.generate, model, self.agent.limits.model_timeout)

        async def streamed(request: ModelRequest) -> ModelResponse:
            final: ModelResponse | None = None
            async for event in model.stream(request):
                if d.first_chunk_at is None:
                    d.first_chunk_at = time.perf_counter()
                if self.output is not None:
                    self.output.observe(event, d, self.emit)
                if isinstance(event, TextDelta):
                    # Shown live (a terminal, a JSON line): encodable like what is stored; the
                    # final response reports the replacement.
                    text = storable_text(event.text)
                    self.emit(TextDeltaReceived(dispatch=d.index, text=text))
                elif isinstance(event, ReasoningDelta):
                    text, index = storable_text(event.text), event.index
                    self.emit(ReasoningDeltaReceived(dispatch=d.index, text=text, index=index))
                elif isinstance(event, ResponseComplete):
                    final = event.response
            if final is None:
                raise ProviderError(
                    f"Model {model.name!r} ended its stream without a final response.",
                    provider=model.name,
                )
            return final

        return agent_deadline(streamed, model, self.agent.limits.model_timeout)
