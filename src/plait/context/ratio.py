"""The thread's measured characters per token, recorded from what a provider reported.

:data:`~plait.context.tokens.CHARS_PER_TOKEN` (4) undercounts log- and CSV-like text about 2x.
Once a dispatch's model call has reported ``usage.input_tokens``, :func:`record_dispatch_ratio`
divides the characters of the request actually sent by it and stores the ratio in the thread
state (:data:`~plait.context.tokens.CHARS_PER_TOKEN_STATE_KEY`), where
:func:`~plait.context.tokens.thread_counter` finds it. Result eviction records it in
``after_tool_call`` (before it estimates the result), summarization at the end of each dispatch;
neither needs another seam.
"""

from __future__ import annotations

from plait.context.tokens import measure_chars_per_token
from plait.middleware.context import DispatchContext

__all__ = ["record_dispatch_ratio"]


def record_dispatch_ratio(ctx: DispatchContext) -> float | None:
    """Measure and record the ratio of ``ctx``'s model call, once per dispatch; the ratio, or
    ``None`` if the dispatch has no request, no reported usage, or too small a request."""
    request, response = ctx.request, ctx.response
    if request is None or response is None or response.usage.input_tokens <= 0:
        return None
    return measure_chars_per_token(
        ctx.turn.state,
        messages=request.messages,
        system_prompt=request.system_prompt,
        tools=request.tools,
        input_tokens=response.usage.input_tokens,
    )
