"""plait: LLM agents from an orchestrator loop and composable middleware.

The names most programs need are importable from here; everything else lives in its layer's
package (``plait.models``, ``plait.middleware``, ``plait.stores``, ``plait.skills``, …).
"""

from plait.__about__ import __version__
from plait.errors import (
    ConfigurationError,
    ContextOverflowError,
    DispatchRejected,
    LimitExceeded,
    PlaitError,
    ProviderError,
    ThreadConflictError,
    ToolArgumentsError,
    ToolError,
    ToolExecutionError,
    ToolResolutionError,
    TurnAborted,
)
from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
)
from plait.middleware import DispatchContext, Event, Middleware, MiddlewareStack, TurnContext
from plait.models import (
    FunctionModel,
    LanguageModelMiddleware,
    Model,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    wrap_model,
)
from plait.runtime import Agent, Limits, RunResult, RunStream
from plait.tools import Tool, ToolContext, ToolDefinition, ToolRegistry, tool

__all__ = [
    "Agent",
    "AssistantMessage",
    "ConfigurationError",
    "ContextOverflowError",
    "DispatchContext",
    "DispatchRejected",
    "Event",
    "FunctionModel",
    "LanguageModelMiddleware",
    "LimitExceeded",
    "Limits",
    "Message",
    "Middleware",
    "MiddlewareStack",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "PlaitError",
    "ProviderError",
    "RunResult",
    "RunStream",
    "ScriptedModel",
    "SystemMessage",
    "TextPart",
    "ThreadConflictError",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolExecutionError",
    "ToolMessage",
    "ToolRegistry",
    "ToolResolutionError",
    "ToolResult",
    "TurnAborted",
    "TurnContext",
    "Usage",
    "UserMessage",
    "__version__",
    "tool",
    "wrap_model",
]
