"""plait: LLM agents from an orchestrator loop and composable middleware.

The names most programs need are importable from here; everything else lives in its layer's
package (``plait.models``, ``plait.middleware``, ``plait.stores``, ``plait.skills``, …).
"""

from __future__ import annotations

from plait.__about__ import __version__
from plait.errors import (
    ConfigurationError,
    ContextOverflowError,
    DispatchLimitExceeded,
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
from plait.lazy import lazy_exports

# Not typing.TYPE_CHECKING: importing typing (and re with it) would double `import plait`'s
# cost. Type checkers treat any name TYPE_CHECKING as true.
TYPE_CHECKING = False

if TYPE_CHECKING:
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
    "DispatchLimitExceeded",
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

# Hidden from type checkers, which then check every name against the imports above.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.messages": (
                "AssistantMessage",
                "Message",
                "SystemMessage",
                "TextPart",
                "ToolCall",
                "ToolMessage",
                "ToolResult",
                "Usage",
                "UserMessage",
            ),
            "plait.middleware": (
                "DispatchContext",
                "Event",
                "Middleware",
                "MiddlewareStack",
                "TurnContext",
            ),
            "plait.models": (
                "FunctionModel",
                "LanguageModelMiddleware",
                "Model",
                "ModelRequest",
                "ModelResponse",
                "ScriptedModel",
                "wrap_model",
            ),
            "plait.runtime": (
                "Agent",
                "Limits",
                "RunResult",
                "RunStream",
            ),
            "plait.tools": (
                "Tool",
                "ToolContext",
                "ToolDefinition",
                "ToolRegistry",
                "tool",
            ),
        },
    )
