"""Events the guards emit, so a CLI or a log shows what they caught."""

from __future__ import annotations

from dataclasses import dataclass

from plait.messages import ToolCall
from plait.middleware.context import Event

__all__ = ["LimitReached", "RepetitionDetected", "ToolCallRejected", "ToolCallRepaired"]


@dataclass(slots=True, kw_only=True)
class ToolCallRejected(Event):
    """The validator refused a call before it ran; ``reason`` is what the model reads."""

    dispatch: int
    call: ToolCall
    reason: str
    type: str = "tool_call_rejected"


@dataclass(slots=True, kw_only=True)
class ToolCallRepaired(Event):
    """The validator repaired broken argument JSON (``original``) into ``call.args``."""

    dispatch: int
    call: ToolCall
    original: str
    type: str = "tool_call_repaired"


@dataclass(slots=True, kw_only=True)
class RepetitionDetected(Event):
    """The model repeated itself ``count`` times (``kind`` is ``"tool_call"`` or ``"text"``)."""

    dispatch: int
    kind: str
    count: int
    policy: str
    type: str = "repetition_detected"


@dataclass(slots=True, kw_only=True)
class LimitReached(Event):
    """A limit refused a call or ended the turn."""

    kind: str
    limit: float
    type: str = "limit_reached"
