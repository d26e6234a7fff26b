"""plait: LLM agents from an orchestrator loop and composable middleware.

The names most programs need are importable from here; everything else lives in its layer's
package (``plait.models``, ``plait.middleware``, ``plait.stores``, ``plait.skills``, …).

Layers, highest first. A module imports only from its own layer or lower ones; a battery never
imports another battery (what two share moves down a layer). ``tests/test_layers.py`` parses this
table and every module under ``src/plait`` with :mod:`ast` and fails on an upward import or an
import cycle. Imports inside functions count. Imports under ``if TYPE_CHECKING:`` must point down
or sideways too, but do not count as cycle edges (they never run).

::

    cli         cli
    batteries   skills context guards telemetry mcp
    runtime     runtime
    middleware  middleware tools
    models      models
    storage     stores backends
    data        messages tokens errors paths __about__
"""

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
