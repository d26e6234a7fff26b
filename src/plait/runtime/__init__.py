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
    TurnStarted,
    ValuesReplaced,
)
from plait.runtime.output import (
    DEFAULT_OUTPUT_RETRIES,
    FINAL_RESULT_TOOL,
    OutputDelta,
    OutputMode,
    OutputValidator,
)
from plait.runtime.output_schema import OutputSpec, strict_schema
from plait.runtime.tool_search import ToolSearch
from plait.runtime.turn import RunResult

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "FINAL_RESULT_TOOL",
    "Agent",
    "DispatchFinished",
    "ErrorOccurred",
    "Limits",
    "ModelCallRetried",
    "ModelRequestSent",
    "ModelResponseReceived",
    "OutputDelta",
    "OutputMode",
    "OutputSpec",
    "OutputValidator",
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
    "strict_schema",
]
