"""The thread's measured characters per token, recorded from what a provider reported.

:data:`~plait.tokens.CHARS_PER_TOKEN` (4) undercounts log- and CSV-like text about 2x.
Once a dispatch's model call has reported ``usage.input_tokens``, a :class:`RatioMeter` divides
the characters of the request actually sent by it and stores the ratio in the thread state
(:data:`~plait.tokens.CHARS_PER_TOKEN_STATE_KEY`), where
:func:`~plait.tokens.thread_counter` finds it. Result eviction records it in
``after_tool_call`` (before it estimates the result), summarization at the end of each
dispatch, overflow recovery around each model call it wraps; none needs another seam.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plait.messages import Message
from plait.middleware.context import DispatchContext
from plait.models.base import ModelRequest, ModelResponse
from plait.tokens import PrefixTotals, message_text, record_chars_per_token

__all__ = ["RatioMeter"]


class RatioMeter:
    """Measures a dispatch's characters per token in O(messages new since its last call).

    Like :class:`~plait.tokens.TokenAccountant`, it keeps a few checkpoints
    (:class:`~plait.tokens.PrefixTotals`: characters through message ``i`` of a list it
    measured), so a request that grew by a few messages costs a few ``len`` calls, not one per
    message of the history.
    """

    def __init__(self, *, max_checkpoints: int = 16) -> None:
        self._totals = PrefixTotals(max_checkpoints)

    def record(self, ctx: DispatchContext) -> float | None:
        """Record the ratio of ``ctx``'s model call in the thread state and return it; ``None``
        if the dispatch has no request, no reported usage, or too small a request."""
        if ctx.request is None or ctx.response is None:
            return None
        return self.record_call(ctx.turn.state, ctx.request, ctx.response)

    def record_call(
        self, state: dict[str, Any], request: ModelRequest, response: ModelResponse
    ) -> float | None:
        """:meth:`record` for one model call's ``request`` and ``response``, into ``state``."""
        if response.usage.input_tokens <= 0:
            return None
        return record_chars_per_token(
            state,
            message_chars=self.chars(request.messages),
            messages=len(request.messages),
            system_prompt=request.system_prompt,
            tools=request.tools,
            input_tokens=response.usage.input_tokens,
        )

    def chars(self, messages: Sequence[Message]) -> int:
        """Characters of ``messages`` as a provider is sent them; leaves a checkpoint."""
        return self._totals.sum(messages, _chars)


def _chars(message: Message) -> int:
    return len(message_text(message))
