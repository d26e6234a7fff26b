"""The runtime: ``Agent``, the turn loop and its events."""

from plait.runtime.agent import Agent, Limits, RunInput, RunStream
from plait.runtime.cache_watch import CacheBroken, CacheWatch
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
    TurnStarted,
    ValuesReplaced,
)
from plait.runtime.tool_search import ToolSearch
from plait.runtime.turn import RunResult

__all__ = [
    "Agent",
    "CacheBroken",
    "CacheWatch",
    "DispatchFinished",
    "ErrorOccurred",
    "Limits",
    "ModelCallRetried",
    "ModelRequestSent",
    "ModelResponseReceived",
    "ReasoningDeltaReceived",
    "ReasoningDropped",
    "RunInput",
    "RunResult",
    "RunStream",
    "TextDeltaReceived",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolSearch",
    "ToolTimeoutReached",
    "TurnFinished",
    "TurnStarted",
    "ValuesReplaced",
]
