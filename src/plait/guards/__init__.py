"""Guards: catch what models do wrong in production, without the user writing it.

* :class:`ToolCallValidator` (model hook, default): unknown tools, non-object or invalid
  arguments, with a one-shot repair of trivially broken JSON.
* :class:`RepetitionDetector` (model hook, default): identical calls or near-identical text.
* :class:`LimitsMiddleware`: model calls, tool calls and tokens, with typed outcomes.
"""

from plait.guards.events import (
    LimitReached,
    RepetitionDetected,
    ToolCallRejected,
    ToolCallRepaired,
)
from plait.guards.limits import LimitsMiddleware
from plait.guards.repetition import RepetitionDetector, RepetitionError
from plait.guards.validator import ToolCallValidator
from plait.runtime.model_hooks import ModelHook

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


def default_model_hooks() -> list[ModelHook]:
    """The hooks every agent gets unless ``Agent(default_guards=False)``."""
    return [ToolCallValidator(), RepetitionDetector()]
