"""The middleware contract: four seams, two wrappers, four pipelines. Every method is optional.

Subclass :class:`Middleware` and override only what you need; the stack calls only the methods a
class overrides, so an unused seam costs nothing.

==================  ===============================  =======================================
hook                order over ``[m1, m2, m3]``      skip / error semantics
==================  ===============================  =======================================
turn_input          m1 → m2 → m3 (each awaits next)  raise → ``TurnContext.abort(err)``; after
                                                     an abort the rest is skipped, turn ends
dispatch_input      m1 → m2 → m3 (each awaits next)  raise → ``DispatchContext.nack(err)``;
                                                     the dispatch is not sent, turn ends
before_model_call   m1 → m2 → m3                     returns the (new) request; raise → the
                                                     turn fails with that error
wrap_model_call     m1( m2( m3( model ) ) )          first registered is outermost
after_model_call    m3 → m2 → m1                     returns the (new) response; an outer
                                                     middleware sees the final response.
                                                     Model hooks (``Agent(model_hooks=…)``) are
                                                     outermost here: they run last, in the
                                                     order given; may reject single calls
                                                     (``ctx.reject_tool_call``)
before_tool_call    m1 → m2 → m3                     return ``None`` (or raise ``SkipToolCall``)
                                                     → the call is skipped: later
                                                     before hooks, the tool and after hooks do
                                                     not run; the call still gets a result
                                                     message saying so. Raise → error result
wrap_tool_call      m1( m2( m3( tool ) ) )           first registered is outermost
after_tool_call     m1 → m2 → m3                     returns the (new) result; raise → error
                                                     result
dispatch_output     m1 → m2 → m3 (each awaits next)  observe and reconcile; not a commit point;
                                                     raise → nack (the dispatch's messages are
                                                     still persisted: pairs stay intact)
turn_output         m1 → m2 → m3 (each awaits next)  runs only after a successful turn; raise →
                                                     abort (the answer is already persisted)
==================  ===============================  =======================================

``[m1, m2, m3]`` is the agent's *resolved* list: middleware that declare
``Placement(position="outermost" | "innermost")`` are moved to that end first, and every
``before`` / ``after`` / ``requires`` is checked when the agent is built
(:mod:`plait.middleware.ordering`; ``Agent.describe()`` prints the result).

Seams receive the dispatch context as their last positional argument; pipelines receive the
context and ``next``. A pipeline hook that does not await ``next()`` ends its pipeline there; one
that calls it twice gets a ``ConfigurationError`` (→ abort or nack), so later hooks never run
twice. A seam or wrapper that returns something other than the request, response or result it
should (``None``, say) raises ``ConfigurationError`` naming the middleware; for the tool seams that
becomes an error result. A tool call that has not started when the turn is aborted or the dispatch
nacked does not run: it gets an error result saying so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from plait.messages import ToolCall, ToolResult
from plait.middleware.context import DispatchContext, TurnContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse
from plait.tools import Tool

__all__ = [
    "SEAMS",
    "Middleware",
    "ModelHandler",
    "Next",
    "SkipToolCall",
    "ToolHandler",
]

Next = Callable[[], Awaitable[None]]
ModelHandler = Callable[[ModelRequest], Awaitable[ModelResponse]]
ToolHandler = Callable[[ToolCall], Awaitable[ToolResult]]

SEAMS = (
    "turn_input",
    "dispatch_input",
    "before_model_call",
    "wrap_model_call",
    "after_model_call",
    "before_tool_call",
    "wrap_tool_call",
    "after_tool_call",
    "dispatch_output",
    "turn_output",
)
"""Every hook name, in the order a turn reaches them."""


class SkipToolCall(Exception):
    """Raise from ``before_tool_call`` to skip the call with ``message`` as its (error) result.

    Returning ``None`` skips too, with a generic message naming the middleware. The stack
    returns the skip (``by`` set to the middleware's name) instead of the call, so the runtime
    knows who skipped it.
    """

    def __init__(self, message: str | None = None, *, by: str = "") -> None:
        self.by = by
        self.message = message or f"Tool call skipped by middleware {by or '(unnamed)'}."
        super().__init__(self.message)


class Middleware:
    """Base class for orchestrator middleware. ``name`` defaults to the class name.

    ``placement`` declares where it must sit (see :mod:`plait.middleware.ordering`): pinned
    outermost or innermost, before/after other kinds, requiring another. The agent checks it when
    it is built.
    """

    placement: Placement = Placement()

    @property
    def name(self) -> str:
        return type(self).__name__

    def tools(self) -> Sequence[Tool]:
        """Tools this middleware contributes to every turn's registry (default: none).

        An agent tool of the same name wins: the middleware's tool is then not registered (this
        is how an agent's own ``read_file`` replaces the skills middleware's).
        """
        return ()

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        await next()

    async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
        await next()

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        return request

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        return await call_next(request)

    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        return response

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        return call

    async def wrap_tool_call(
        self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
    ) -> ToolResult:
        return await call_next(call)

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: DispatchContext
    ) -> ToolResult:
        return result

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        await next()

    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        await next()

    def overrides(self, hook: str) -> bool:
        """Whether this class implements ``hook`` rather than inheriting the no-op."""
        return getattr(type(self), hook) is not getattr(Middleware, hook)

    def __repr__(self) -> str:
        return f"<{self.name}>"
