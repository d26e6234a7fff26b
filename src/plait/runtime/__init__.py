"""The runtime: ``Agent``, the turn loop and its events."""

from plait.runtime.agent import Agent, Limits, RunInput, RunStream
from plait.runtime.events import (
    DispatchFinished,
    ErrorOccurred,
    ModelCallRerouted,
    ModelCallRetried,
    ModelRequestSent,
    ModelResponseReceived,
    ReasoningDeltaReceived,
    ReasoningDropped,
    SubagentEventRelayed,
    TextDeltaReceived,
    ToolCallFinished,
    ToolCallStarted,
    ToolTimeoutReached,
    TurnFinished,
    TurnStarted,
    ValuesReplaced,
)
from plait.runtime.tool_search import ToolSearch
from plait.runtime.turn import RunResult

__all__ = [
    "Agent",
    "DispatchFinished",
    "ErrorOccurred",
    "Limits",
    "ModelCallRerouted",
    "ModelCallRetried",
    "ModelRequestSent",
    "ModelResponseReceived",
    "ReasoningDeltaReceived",
    "ReasoningDropped",
    "RunInput",
    "RunResult",
    "RunStream",
    "SubagentEventRelayed",
    "TextDeltaReceived",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolSearch",
    "ToolTimeoutReached",
    "TurnFinished",
    "TurnStarted",
    "ValuesReplaced",
]
