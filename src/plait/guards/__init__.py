"""Guards: catch what models do wrong in production, without the user writing it.

* :class:`ToolCallValidator` (default): unknown tools, non-object or invalid arguments, with a
  one-shot repair of trivially broken JSON.
* :class:`RepetitionDetector` (default): identical calls or near-identical text.
* :class:`LimitsMiddleware`: model calls, tool calls and tokens, with typed outcomes.

The two default guards are ``after_model_call`` middleware pinned outermost. Every agent installs
them (``Agent(default_guards=False)`` opts out), so they live in the runtime layer
(:mod:`plait.runtime.validator`, :mod:`plait.runtime.repetition`) and are re-exported here.
"""

from plait.guards.events import LimitReached
from plait.guards.limits import LimitsMiddleware
from plait.runtime.events import RepetitionDetected, ToolCallRejected, ToolCallRepaired
from plait.runtime.repetition import RepetitionDetector, RepetitionError
from plait.runtime.validator import ToolCallValidator

__all__ = [
    "LimitReached",
    "LimitsMiddleware",
    "RepetitionDetected",
    "RepetitionDetector",
    "RepetitionError",
    "ToolCallRejected",
    "ToolCallRepaired",
    "ToolCallValidator",
]
