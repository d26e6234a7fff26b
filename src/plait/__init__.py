"""plait: LLM agents from an orchestrator loop and composable middleware.

The names most programs need are importable from here; everything else lives in its layer's
package (``plait.models``, ``plait.middleware``, ``plait.stores``, ``plait.skills``, …).

The batteries (skills, context management, limits, stores, backends) are exported here too, but
loaded on first use, like every name here but the errors and ``__version__``
(:mod:`plait.lazy`): ``import plait`` loads four small modules; type checkers and IDEs see the
names through the ``TYPE_CHECKING`` imports below.

Layers, highest first. A module imports only from its own layer or lower ones; a battery never
imports another battery (what two share moves down a layer). ``tests/test_layers.py`` parses this
table and every module under ``src/plait`` with :mod:`ast` and fails on an upward import or an
import cycle. Imports inside functions count. Imports under ``if TYPE_CHECKING:`` must point down
or sideways too, but do not count as cycle edges (they never run).

::

    cli         cli serve
    batteries   skills context guards telemetry mcp trace workspace durable subagents
    runtime     runtime
    middleware  middleware tools
    models      models
    storage     stores backends sandbox
    files       jsonfile
    data        messages parts images history tokens errors paths lazy storable pricing __about__
"""

from __future__ import annotations

from plait.__about__ import __version__
from plait.errors import (
    ConfigurationError,
    ContextOverflowError,
    DecisionError,
    DispatchRejected,
    LimitExceeded,
    OutputRetry,
    OutputValidationError,
    PlaitError,
    ProviderError,
    ResumeConflict,
    ThreadConflictError,
    ThreadNotPaused,
    ThreadPaused,
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
    from plait.backends import LocalBackend, MemoryBackend, SQLiteBackend
    from plait.context import (
        OverflowRecoveryMiddleware,
        ResultEvictionMiddleware,
        SummarizationMiddleware,
    )
    from plait.guards import LimitsMiddleware
    from plait.messages import (
        AssistantMessage,
        FilePart,
        ImagePart,
        Message,
        ReasoningPart,
        SystemMessage,
        TextPart,
        ToolCall,
        ToolMessage,
        ToolResult,
        Usage,
        UserMessage,
    )
    from plait.middleware import (
        DispatchContext,
        Event,
        Middleware,
        MiddlewareStack,
        ModelHook,
        TurnContext,
    )
    from plait.models import (
        FunctionModel,
        LanguageModelMiddleware,
        Model,
        ModelRequest,
        ModelResponse,
        ScriptedModel,
        wrap_model,
    )
    from plait.runtime import (
        Agent,
        Answer,
        ApprovalMiddleware,
        Approve,
        Limits,
        OutputDeltaReceived,
        PauseTurn,
        PendingCall,
        Reject,
        RunResult,
        RunStream,
    )
    from plait.skills import FilesystemSource, SkillsMiddleware
    from plait.skills.managed import SkillManager, create_skill_manager
    from plait.stores import MemoryThreadStore, SQLiteThreadStore, ThreadStore
    from plait.tools import Tool, ToolContext, ToolDefinition, ToolRegistry, tool

__all__ = [
    "Agent",
    "Answer",
    "ApprovalMiddleware",
    "Approve",
    "AssistantMessage",
    "ConfigurationError",
    "ContextOverflowError",
    "DecisionError",
    "DispatchContext",
    "DispatchRejected",
    "Event",
    "FilePart",
    "FilesystemSource",
    "FunctionModel",
    "ImagePart",
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
    "OutputDeltaReceived",
    "OutputRetry",
    "OutputValidationError",
    "OverflowRecoveryMiddleware",
    "PauseTurn",
    "PendingCall",
    "PlaitError",
    "ProviderError",
    "ReasoningPart",
    "Reject",
    "ResultEvictionMiddleware",
    "ResumeConflict",
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
    "ThreadNotPaused",
    "ThreadPaused",
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

# Hidden from type checkers, which then check every name against the imports above.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.messages": (
                "AssistantMessage",
                "FilePart",
                "ImagePart",
                "Message",
                "ReasoningPart",
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
                "ModelHook",
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
                "Answer",
                "ApprovalMiddleware",
                "Approve",
                "Limits",
                "OutputDeltaReceived",
                "PauseTurn",
                "PendingCall",
                "Reject",
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
            "plait.backends": (
                "LocalBackend",
                "MemoryBackend",
                "SQLiteBackend",
            ),
            "plait.context": (
                "OverflowRecoveryMiddleware",
                "ResultEvictionMiddleware",
                "SummarizationMiddleware",
            ),
            "plait.guards": ("LimitsMiddleware",),
            "plait.skills": (
                "FilesystemSource",
                "SkillsMiddleware",
            ),
            "plait.skills.managed": (
                "SkillManager",
                "create_skill_manager",
            ),
            "plait.stores": (
                "MemoryThreadStore",
                "SQLiteThreadStore",
                "ThreadStore",
            ),
        },
    )
