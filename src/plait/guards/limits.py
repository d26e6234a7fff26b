"""``LimitsMiddleware``: bounds on model calls, tool calls and tokens, with typed outcomes.

=======================  ===================================  ====================================
limit                    checked                              outcome
=======================  ===================================  ====================================
model_calls_per_turn     ``dispatch_input``, before the call  the turn ends with ``LimitExceeded``
model_calls_per_thread   same; counted in the thread state    same
tokens_per_turn          same; provider usage, or estimated   same
tool_calls_per_tool      ``before_tool_call``                 the call is refused (the model reads
tool_calls_total                                              why), then the turn ends after the
                                                              dispatch is persisted
=======================  ===================================  ====================================

Every limit ends the turn *between* dispatches, after the last dispatch's messages (each tool call
with its result) were persisted, so the thread replays cleanly into the next request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from plait.errors import LimitExceeded, quoted
from plait.guards.events import LimitReached
from plait.messages import ToolCall
from plait.middleware.base import Middleware, Next, SkipToolCall
from plait.middleware.context import DispatchContext, TurnContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse
from plait.tokens import TokenAccountant

__all__ = ["THREAD_MODEL_CALLS_KEY", "LimitsMiddleware"]

THREAD_MODEL_CALLS_KEY = "plait.limits.model_calls"
"""Thread-state key holding the number of model calls made on the thread so far."""


@dataclass(slots=True)
class _TurnCounts:
    tokens: int = 0
    tool_calls: int = 0
    per_tool: dict[str, int] = field(default_factory=dict)
    exceeded: LimitExceeded | None = None


class LimitsMiddleware(Middleware):
    """Place it first so its limits apply before other middleware spends anything."""

    placement = Placement(position="outermost")

    def __init__(
        self,
        *,
        model_calls_per_turn: int | None = None,
        model_calls_per_thread: int | None = None,
        tool_calls_per_tool: int | Mapping[str, int] | None = None,
        tool_calls_total: int | None = None,
        tokens_per_turn: int | None = None,
    ) -> None:
        self.model_calls_per_turn = model_calls_per_turn
        self.model_calls_per_thread = model_calls_per_thread
        self.tool_calls_per_tool = tool_calls_per_tool
        self.tool_calls_total = tool_calls_total
        self.tokens_per_turn = tokens_per_turn
        # The shared, incremental estimator: per dispatch it counts only what was added since.
        self._accountant = TokenAccountant()

    def _counts(self, turn: TurnContext) -> _TurnCounts:
        counts = turn.scratch.get(self)
        if counts is None:
            counts = turn.scratch[self] = _TurnCounts()
        assert isinstance(counts, _TurnCounts)
        return counts

    async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
        counts = self._counts(ctx.turn)
        if counts.exceeded is not None:
            # A tool-call limit was reached but this middleware's dispatch_output did not run
            # (an earlier hook ended that pipeline): end the turn here, before the next call.
            ctx.nack(counts.exceeded)
            return
        thread_calls = int(ctx.state.get(THREAD_MODEL_CALLS_KEY, 0))
        checks = (
            (
                "model_calls_per_turn",
                self.model_calls_per_turn,
                ctx.index,
                "model calls in one turn",
            ),
            (
                "model_calls_per_thread",
                self.model_calls_per_thread,
                thread_calls,
                "model calls on this thread",
            ),
            ("tokens_per_turn", self.tokens_per_turn, counts.tokens, "tokens in one turn"),
        )
        for kind, limit, used, what in checks:
            if limit is not None and used >= limit:
                ctx.turn.emit(LimitReached(kind=kind, limit=limit))
                ctx.nack(
                    LimitExceeded(
                        kind,
                        limit,
                        f"Limit reached: {used} of {limit} {what}. "
                        "The thread is intact; raise the limit to go on.",
                    )
                )
                return
        ctx.state[THREAD_MODEL_CALLS_KEY] = thread_calls + 1
        await next()

    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        if self.tokens_per_turn is not None:
            used = response.usage.total_tokens or self._estimate(request, response)
            self._counts(ctx.turn).tokens += used
        return response

    def _estimate(self, request: ModelRequest, response: ModelResponse) -> int:
        """Input plus output tokens of a call the provider reported no usage for."""
        prompt = self._accountant.request(
            request.messages, system_prompt=request.system_prompt, tools=request.tools
        )
        return prompt + self._accountant.counter.count(response.content)

    def _tool_limit(self, name: str) -> int | None:
        if isinstance(self.tool_calls_per_tool, Mapping):
            return self.tool_calls_per_tool.get(name)
        return self.tool_calls_per_tool

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        counts = self._counts(ctx.turn)
        per_tool, total = self._tool_limit(call.name), self.tool_calls_total
        used = counts.per_tool.get(call.name, 0)
        if per_tool is not None and used >= per_tool:
            self._exceed(
                ctx,
                counts,
                "tool_calls_per_tool",
                per_tool,
                f"Limit reached: tool {quoted(call.name)} may be called {per_tool} times per turn.",
            )
        if total is not None and counts.tool_calls >= total:
            self._exceed(
                ctx,
                counts,
                "tool_calls_total",
                total,
                f"Limit reached: {total} tool calls per turn.",
            )
        counts.per_tool[call.name] = used + 1
        counts.tool_calls += 1
        return call

    def _exceed(
        self, ctx: DispatchContext, counts: _TurnCounts, kind: str, limit: int, message: str
    ) -> None:
        if counts.exceeded is None:
            counts.exceeded = LimitExceeded(kind, limit, message + " The turn was ended.")
            ctx.turn.emit(LimitReached(kind=kind, limit=limit))
        raise SkipToolCall(message + " The call did not run.")

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        await next()
        exceeded = self._counts(ctx.turn).exceeded
        if exceeded is not None:
            ctx.turn.abort(exceeded)
