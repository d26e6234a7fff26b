"""plait: LLM agents from an orchestrator loop and composable middleware.

The names most programs need are importable from here; everything else lives in its layer's
package (``plait.models``, ``plait.middleware``, ``plait.stores``, ``plait.skills``, …).

The batteries (skills, context management, limits, stores, backends) are exported here too, but
loaded on first use (PEP 562 ``__getattr__``), so ``import plait`` stays cheap; type checkers and
IDEs see them through the ``TYPE_CHECKING`` imports below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from plait.backends import LocalBackend, MemoryBackend, SQLiteBackend
    from plait.context import (
        OverflowRecoveryMiddleware,
        ResultEvictionMiddleware,
        SummarizationMiddleware,
    )
    from plait.guards import LimitsMiddleware
    from plait.runtime.model_hooks import ModelHook
    from plait.skills import FilesystemSource, SkillsMiddleware
    from plait.skills.managed import SkillManager, create_skill_manager
    from plait.stores import MemoryThreadStore, SQLiteThreadStore, ThreadStore

_LAZY = {
    "FilesystemSource": "plait.skills",
    "LimitsMiddleware": "plait.guards",
    "LocalBackend": "plait.backends",
    "MemoryBackend": "plait.backends",
    "MemoryThreadStore": "plait.stores",
    "ModelHook": "plait.runtime.model_hooks",
    "OverflowRecoveryMiddleware": "plait.context",
    "ResultEvictionMiddleware": "plait.context",
    "SQLiteBackend": "plait.backends",
    "SQLiteThreadStore": "plait.stores",
    "SkillManager": "plait.skills.managed",
    "SkillsMiddleware": "plait.skills",
    "SummarizationMiddleware": "plait.context",
    "ThreadStore": "plait.stores",
    "create_skill_manager": "plait.skills.managed",
}
"""Battery names exported lazily: name -> the module that defines or re-exports it."""


if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all __getattr__

    def __getattr__(name: str) -> Any:
        """Load a battery name on first access (then it is an ordinary module attribute)."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'plait' has no attribute {name!r}")
        value = getattr(import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Agent",
    "AssistantMessage",
    "ConfigurationError",
    "ContextOverflowError",
    "DispatchContext",
    "DispatchRejected",
    "Event",
    "FilesystemSource",
    "FunctionModel",
    "LanguageModelMiddleware",
    "LimitExceeded",
    "Limits",
    "LimitsMiddleware",
    "LocalBackend",
    "MemoryBackend",
    "MemoryThreadStore",
    "Message",
    "Middleware",
    "MiddlewareStack",
    "Model",
    "ModelHook",
    "ModelRequest",
    "ModelResponse",
    "OverflowRecoveryMiddleware",
    "PlaitError",
    "ProviderError",
    "ResultEvictionMiddleware",
    "RunResult",
    "RunStream",
    "SQLiteBackend",
    "SQLiteThreadStore",
    "ScriptedModel",
    "SkillManager",
    "SkillsMiddleware",
    "SummarizationMiddleware",
    "SystemMessage",
    "TextPart",
    "ThreadConflictError",
    "ThreadStore",
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
    "create_skill_manager",
    "tool",
    "wrap_model",
]
