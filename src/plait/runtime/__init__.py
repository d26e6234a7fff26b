"""The runtime: ``Agent``, the turn loop and its events."""

from plait.runtime.agent import Agent, Limits, RunInput, RunStream
from plait.runtime.events import (
    DispatchFinished,
    ErrorOccurred,
    ModelCallRetried,
    ModelRequestSent,
    ModelResponseReceived,
    ReasoningDeltaReceived,
    ReasoningDropped,
    TextDeltaReceived,
    ToolCallFinished,
    ToolCallStarted,
    ToolTimeoutReached,
    TurnFinished,
    TurnPaused,
    TurnResumed,
    TurnStarted,
    ValuesReplaced,
)
from plait.runtime.pause import (
    Answer,
    ApprovalMiddleware,
    Approve,
    Decision,
    PauseTurn,
    PendingCall,
    Reject,
)
from plait.runtime.tool_search import ToolSearch
from plait.runtime.turn import RunResult

__all__ = [
    "Agent",
    "Answer",
    "ApprovalMiddleware",
    "Approve",
    "Decision",
    "DispatchFinished",
    "ErrorOccurred",
    "Limits",
    "ModelCallRetried",
    "ModelRequestSent",
    "ModelResponseReceived",
    "PauseTurn",
    "PendingCall",
    "ReasoningDeltaReceived",
    "ReasoningDropped",
    "Reject",
    "RunInput",
    "RunResult",
    "RunStream",
    "TextDeltaReceived",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolSearch",
    "ToolTimeoutReached",
    "TurnFinished",
    "TurnPaused",
    "TurnResumed",
    "TurnStarted",
    "ValuesReplaced",
]
