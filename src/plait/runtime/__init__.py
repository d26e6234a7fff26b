"""The runtime: ``Agent``, the turn loop and its events."""

from plait.runtime.agent import Agent, Limits, RunInput, RunStream
from plait.runtime.events import (
    DispatchEnd,
    ErrorEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    ToolTimedOut,
    TurnEnd,
    TurnStart,
    ValuesReplaced,
)
from plait.runtime.tool_search import SEARCH_TOOLS_NAME, ToolSearch
from plait.runtime.turn import RunResult

__all__ = [
    "SEARCH_TOOLS_NAME",
    "Agent",
    "DispatchEnd",
    "ErrorEvent",
    "Limits",
    "ModelRequestEvent",
    "ModelResponseEvent",
    "RunInput",
    "RunResult",
    "RunStream",
    "TextDeltaEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "ToolSearch",
    "ToolTimedOut",
    "TurnEnd",
    "TurnStart",
    "ValuesReplaced",
]
