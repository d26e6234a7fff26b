"""What a request tells an adapter about its own cacheability: shared by the Anthropic
breakpoints (:mod:`plait.models.anthropic_cache`), the OpenAI cache key
(:mod:`plait.models.openai_cache`) and the runtime's :class:`~plait.runtime.cache_watch.CacheWatch`.

The runtime puts two entries into every agent request's ``metadata``:

==========================  ================================================================
key                         value
==========================  ================================================================
``thread_id``               the thread the request belongs to (OpenAI's ``prompt_cache_key``)
``projected_messages``      how many of the request's *last* messages are projections
                            (``TurnContext.ephemeral``: a managed skill's body, a handle
                            note): re-sent on every call after the history, never part of
                            the cached prefix
==========================  ================================================================

A request without them (a battery's own call, a hand-built one) has no thread and no
projections: every message counts as stable.
"""

from __future__ import annotations

from plait.models.base import ModelRequest

__all__ = ["PROJECTED_KEY", "THREAD_KEY", "stable_length"]

THREAD_KEY = "thread_id"
PROJECTED_KEY = "projected_messages"


def stable_length(request: ModelRequest) -> int:
    """How many of ``request.messages`` form its stable prefix: all but the projected tail."""
    projected = request.metadata.get(PROJECTED_KEY, 0)
    total = len(request.messages)
    if type(projected) is not int or projected <= 0:
        return total
    return max(total - projected, 0)
