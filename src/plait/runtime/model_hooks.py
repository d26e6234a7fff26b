"""Model hooks: the light seam that looks at a response before the loop acts on it.

A model hook is a plain function, sync or async, ``hook(response, ctx) -> ModelResponse | None``,
registered on the agent (``Agent(model_hooks=[...])``). Hooks run after every
``after_model_call``, in registration order; each sees the previous one's response. A hook may

* return a replacement response (or ``None`` to keep it),
* reject individual tool calls with ``ctx.reject_tool_call(call_id, message)`` — the call does not
  run and the model reads ``message`` as its error result, while valid siblings still run,
* add a corrective message with ``ctx.add_followup(message)``, persisted after the tool results,
* raise a :class:`~plait.errors.PlaitError` to end the turn (nothing of this dispatch is persisted,
  so no tool call is left without its result).

The default guards (:mod:`plait.guards`) register here unless ``Agent(default_guards=False)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias

from plait.middleware.context import DispatchContext
from plait.models.base import ModelResponse

__all__ = ["ModelHook", "run_model_hooks"]

ModelHook: TypeAlias = Callable[
    [ModelResponse, DispatchContext], ModelResponse | Awaitable[ModelResponse | None] | None
]


async def run_model_hooks(
    hooks: Sequence[ModelHook], response: ModelResponse, ctx: DispatchContext
) -> ModelResponse:
    """Apply ``hooks`` in order and return the final response."""
    for hook in hooks:
        outcome = hook(response, ctx)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome is not None:
            response = outcome
    return response
