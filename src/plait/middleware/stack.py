"""``MiddlewareStack``: an ordered list of middleware and the runners that apply the contract.

The ordering and skip rules are documented once, in :mod:`plait.middleware.base`; this module is
their implementation. The stack pre-sorts middleware by the hooks each class overrides, so a turn
pays only for hooks that exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any, Self, TypeVar

from plait.errors import ConfigurationError
from plait.messages import ToolCall, ToolResult
from plait.middleware.base import (
    SEAMS,
    Middleware,
    ModelHandler,
    Next,
    SkipToolCall,
    ToolHandler,
)
from plait.middleware.context import DispatchContext, TurnContext
from plait.models.base import ModelRequest, ModelResponse

__all__ = ["MiddlewareStack"]

T = TypeVar("T")


def _returned(value: object, expected: type[T], m: Middleware, hook: str) -> T:
    """``value`` if a seam returned the right type; otherwise a :class:`ConfigurationError`
    naming the middleware, instead of an ``AttributeError`` somewhere downstream.

    Callers test the exact type inline first (a call per seam per middleware adds up) and come
    here only for a subclass or a wrong value."""
    if not isinstance(value, expected):
        raise ConfigurationError(
            f"{m.name}.{hook} returned {type(value).__name__}, not a {expected.__name__}; "
            "a seam must return the (possibly new) object it was given."
        )
    return value


class MiddlewareStack:
    """Middleware in registration order. ``MiddlewareStack().use(a).use(b)`` chains.

    An empty stack is valid and is what the runtime uses when none is given: no per-turn
    middleware runs.
    """

    def __init__(self, middleware: Iterable[Middleware] = ()) -> None:
        self._middleware: list[Middleware] = []
        self._by_hook: dict[str, list[Middleware]] = {hook: [] for hook in SEAMS}
        # Per hook, (middleware, bound hook) pairs taken once at registration: a model call then
        # creates no bound methods (the hook an instance has when it is added is what runs).
        self._bound: dict[str, list[tuple[Middleware, Any]]] = {hook: [] for hook in SEAMS}
        for m in middleware:
            self.use(m)

    def use(self, middleware: Middleware) -> Self:
        """Append ``middleware`` (it runs after those already registered); returns the stack."""
        if not isinstance(middleware, Middleware):
            raise TypeError(
                f"{middleware!r} is not a plait Middleware; subclass plait.Middleware and "
                "override the hooks you need."
            )
        self._middleware.append(middleware)
        for hook in SEAMS:
            if middleware.overrides(hook):
                self._by_hook[hook].append(middleware)
                self._bound[hook].append((middleware, getattr(middleware, hook)))
        return self

    def __iter__(self) -> Iterator[Middleware]:
        return iter(self._middleware)

    def __len__(self) -> int:
        return len(self._middleware)

    @property
    def has_dispatch_input(self) -> bool:
        """Whether any middleware overrides ``dispatch_input``: the runtime skips a pipeline or
        seam runner, and the coroutine it costs, when none does (likewise ``has_<hook>`` for
        ``dispatch_output`` and the six per-call seams below)."""
        return bool(self._bound["dispatch_input"])

    @property
    def has_dispatch_output(self) -> bool:
        return bool(self._bound["dispatch_output"])

    @property
    def has_before_model_call(self) -> bool:
        return bool(self._bound["before_model_call"])

    @property
    def has_wrap_model_call(self) -> bool:
        return bool(self._bound["wrap_model_call"])

    @property
    def has_wrap_tool_call(self) -> bool:
        return bool(self._bound["wrap_tool_call"])

    @property
    def has_after_model_call(self) -> bool:
        return bool(self._bound["after_model_call"])

    @property
    def has_before_tool_call(self) -> bool:
        return bool(self._bound["before_tool_call"])

    @property
    def has_after_tool_call(self) -> bool:
        return bool(self._bound["after_tool_call"])

    def implementing(self, hook: str) -> list[Middleware]:
        """The middleware that override ``hook``, in registration order."""
        return list(self._by_hook[hook])

    # -- pipelines -------------------------------------------------------------------------

    async def run_turn_input(self, ctx: TurnContext) -> None:
        await _pipeline(
            [hook for _, hook in self._bound["turn_input"]], ctx, lambda: ctx.aborted, ctx.abort
        )

    async def run_turn_output(self, ctx: TurnContext) -> None:
        await _pipeline(
            [hook for _, hook in self._bound["turn_output"]],
            ctx,
            lambda: ctx.aborted,
            ctx.abort,
        )

    async def run_dispatch_input(self, ctx: DispatchContext) -> None:
        if not self._by_hook["dispatch_input"]:
            return  # per model call: skip building an empty chain
        await _pipeline(
            [hook for _, hook in self._bound["dispatch_input"]],
            ctx,
            lambda: ctx.stopped,
            ctx.nack,
        )

    async def run_dispatch_output(self, ctx: DispatchContext) -> None:
        if not self._by_hook["dispatch_output"]:
            return
        await _pipeline(
            [hook for _, hook in self._bound["dispatch_output"]],
            ctx,
            lambda: ctx.stopped,
            ctx.nack,
        )

    # -- model seams -----------------------------------------------------------------------

    async def run_before_model_call(
        self, request: ModelRequest, ctx: DispatchContext
    ) -> ModelRequest:
        """``before_model_call`` first → last; each gets the previous one's request."""
        turn = ctx.turn
        for m, hook in self._bound["before_model_call"]:
            if ctx._error is not None or turn._error is not None:  # ctx.stopped, inline
                break
            changed = await hook(request, ctx)
            request = (
                changed
                if type(changed) is ModelRequest
                else _returned(changed, ModelRequest, m, "before_model_call")
            )
        return request

    def wrap_model(self, handler: ModelHandler, ctx: DispatchContext) -> ModelHandler:
        """``handler`` wrapped by every ``wrap_model_call`` (but those in ``skip_wraps``); the
        first registered is outermost."""
        skip = ctx.turn.skip_wraps
        for m in reversed(self._by_hook["wrap_model_call"]):
            if m not in skip:
                handler = _bind_model(m, handler, ctx)
        return handler

    async def run_after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        """``after_model_call`` last → first, so the outermost middleware sees the final word."""
        turn = ctx.turn
        for m, hook in reversed(self._bound["after_model_call"]):
            if ctx._error is not None or turn._error is not None:  # ctx.stopped, inline
                break
            changed = await hook(response, request, ctx)
            response = (
                changed
                if type(changed) is ModelResponse
                else _returned(changed, ModelResponse, m, "after_model_call")
            )
        return response

    # -- tool seams ------------------------------------------------------------------------

    async def run_before_tool_call(
        self, call: ToolCall, ctx: DispatchContext
    ) -> ToolCall | SkipToolCall:
        """``before_tool_call`` first → last; a ``None`` or a raised :class:`SkipToolCall` stops
        the chain and is returned as a ``SkipToolCall`` naming the middleware (``by``)."""
        turn = ctx.turn
        for m, hook in self._bound["before_tool_call"]:
            if ctx._error is not None or turn._error is not None:  # ctx.stopped, inline
                break
            try:
                changed = await hook(call, ctx)
            except SkipToolCall as skip:
                skip.by = m.name
                return skip
            if changed is None:
                return SkipToolCall(by=m.name)
            call = changed
        return call

    def wrap_tool(self, handler: ToolHandler, ctx: DispatchContext) -> ToolHandler:
        """``handler`` wrapped by every ``wrap_tool_call`` (but those in ``skip_wraps``); the
        first registered is outermost."""
        skip = ctx.turn.skip_wraps
        for m in reversed(self._by_hook["wrap_tool_call"]):
            if m not in skip:
                handler = _bind_tool(m, handler, ctx)
        return handler

    async def run_after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: DispatchContext
    ) -> ToolResult:
        """``after_tool_call`` first → last."""
        turn = ctx.turn
        for m, hook in self._bound["after_tool_call"]:
            if ctx._error is not None or turn._error is not None:  # ctx.stopped, inline
                break
            changed = await hook(call, result, ctx)
            result = (
                changed
                if type(changed) is ToolResult
                else _returned(changed, ToolResult, m, "after_tool_call")
            )
        return result


def _bind_model(m: Middleware, inner: ModelHandler, ctx: DispatchContext) -> ModelHandler:
    async def handler(request: ModelRequest) -> ModelResponse:
        response = await m.wrap_model_call(request, ctx, inner)
        if type(response) is ModelResponse:
            return response
        return _returned(response, ModelResponse, m, "wrap_model_call")

    return handler


def _bind_tool(m: Middleware, inner: ToolHandler, ctx: DispatchContext) -> ToolHandler:
    async def handler(call: ToolCall) -> ToolResult:
        result = await m.wrap_tool_call(call, ctx, inner)
        if type(result) is ToolResult:
            return result
        return _returned(result, ToolResult, m, "wrap_tool_call")

    return handler


async def _pipeline(
    hooks: list[Callable[[Any, Next], Awaitable[None]]],
    ctx: Any,
    stopped: Callable[[], bool],
    fail: Callable[[BaseException], None],
) -> None:
    """Run ``hooks`` as a chain: each gets ``next`` for the rest. Any exception a hook raises
    (cancellation excepted) is handed to ``fail`` — abort or nack — and the chain stops.

    Each ``next`` runs the rest of the chain once: a hook that calls it a second time gets a
    :class:`ConfigurationError` (which fails the pipeline) rather than running every later hook
    again.
    """
    if hooks:
        await _next(hooks, 0, ctx, stopped, fail)()


def _next(
    hooks: list[Callable[[Any, Next], Awaitable[None]]],
    i: int,
    ctx: Any,
    stopped: Callable[[], bool],
    fail: Callable[[BaseException], None],
) -> Next:
    """The ``next`` that runs ``hooks[i]`` (given to ``hooks[i - 1]``): it awaits the hook
    itself, so a level costs the hook's coroutine and its ``next``'s, nothing more."""
    called = False

    async def next_() -> None:
        nonlocal called
        if called:
            raise ConfigurationError(
                f"{_hook_name(hooks[i - 1])} called next() more than once; "
                "a pipeline hook awaits next() at most once."
            )
        called = True
        if i >= len(hooks) or stopped():
            return
        try:
            await hooks[i](ctx, _next(hooks, i + 1, ctx, stopped, fail))
        except Exception as exc:
            fail(exc)

    return next_


def _hook_name(hook: Callable[..., Any]) -> str:
    owner = getattr(hook, "__self__", None)
    name = getattr(hook, "__name__", "hook")
    return f"{owner.name}.{name}" if isinstance(owner, Middleware) else name
