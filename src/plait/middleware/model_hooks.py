"""Model hooks: the light spelling of "look at a response before the loop acts on it".

A model hook is a plain function, sync or async, ``hook(response, ctx) -> ModelResponse | None``.
It is sugar over the one middleware chain: :class:`ModelHookMiddleware` wraps it as an
``after_model_call`` middleware pinned outermost, so hooks run after every other
``after_model_call``; :func:`as_middleware` turns a list into middleware that run in the order
given (``Agent(model_hooks=[...])`` does this for you). A hook may

* return a replacement response (or ``None`` to keep it),
* reject individual tool calls with ``ctx.reject_tool_call(call_id, message)`` — the call does not
  run and the model reads ``message`` as its error result, while valid siblings still run,
* add a corrective message with ``ctx.add_followup(message)``, persisted after the tool results,
* raise a :class:`~plait.errors.PlaitError` to end the turn (nothing of this dispatch is persisted,
  so no tool call is left without its result).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeAlias

from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse

__all__ = ["ModelHook", "ModelHookMiddleware", "as_middleware"]

ModelHook: TypeAlias = Callable[
    [ModelResponse, DispatchContext], ModelResponse | Awaitable[ModelResponse | None] | None
]


class ModelHookMiddleware(Middleware):
    """``hook`` as an ``after_model_call`` middleware, pinned outermost (it runs last)."""

    placement = Placement(position="outermost")

    def __init__(self, hook: ModelHook) -> None:
        self.hook = hook

    @property
    def name(self) -> str:
        return f"model_hook({getattr(self.hook, '__name__', type(self.hook).__name__)})"

    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        outcome = self.hook(response, ctx)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return response if outcome is None else outcome


def as_middleware(hooks: Iterable[ModelHook | Middleware]) -> list[Middleware]:
    """Middleware that apply ``hooks`` in the order given, after every other ``after_model_call``.

    ``after_model_call`` runs last → first, so the list comes back reversed: put it at the front
    of the agent's middleware. A :class:`Middleware` in ``hooks`` (such as the default guards) is
    taken as it is; a function is wrapped in :class:`ModelHookMiddleware`.
    """
    wrapped = [h if isinstance(h, Middleware) else ModelHookMiddleware(h) for h in hooks]
    return wrapped[::-1]
