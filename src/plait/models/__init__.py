"""Models: the protocol, request/response types, scripted fakes and language-model middleware.

Provider adapters live in :mod:`plait.models.openai` (Chat Completions),
:mod:`plait.models.openai_responses` (the Responses API) and :mod:`plait.models.anthropic`
(optional extras); :func:`plait.models.registry.resolve_model` turns a spec string into a model.
"""

from __future__ import annotations

from plait.lazy import lazy_exports

TYPE_CHECKING = False  # not typing's: importing this package must not import typing

if TYPE_CHECKING:
    from plait.models.anthropic import AnthropicModel
    from plait.models.anthropic_cache import AnthropicCache
    from plait.models.base import (
        CallClass,
        Model,
        ModelRequest,
        ModelResponse,
        ModelSettings,
        OutputSchema,
        Reasoning,
        ReasoningDelta,
        ResponseComplete,
        StreamEvent,
        TextDelta,
        ToolCallDelta,
        collect_stream,
    )
    from plait.models.fallback import FallbackModel, FallbackNotice
    from plait.models.language_model import LanguageModelMiddleware, WrappedModel, wrap_model
    from plait.models.openai import OpenAIChatModel
    from plait.models.openai_cache import OpenAIPromptCache
    from plait.models.openai_responses import OpenAIResponsesModel
    from plait.models.registry import resolve_model
    from plait.models.retrying import Backoff
    from plait.models.scripted import (
        FunctionModel,
        InvalidScriptEntry,
        ScriptedModel,
        ScriptExhausted,
        ScriptIncomplete,
    )
    from plait.models.timeouts import ModelTimeouts

__all__ = [
    "AnthropicCache",
    "AnthropicModel",
    "Backoff",
    "CallClass",
    "FallbackModel",
    "FallbackNotice",
    "FunctionModel",
    "InvalidScriptEntry",
    "LanguageModelMiddleware",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelTimeouts",
    "OpenAIChatModel",
    "OpenAIPromptCache",
    "OpenAIResponsesModel",
    "OutputSchema",
    "Reasoning",
    "ReasoningDelta",
    "ResponseComplete",
    "ScriptExhausted",
    "ScriptIncomplete",
    "ScriptedModel",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "WrappedModel",
    "collect_stream",
    "resolve_model",
    "wrap_model",
]

# Hidden from type checkers, which then check every name against the imports above.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.models.anthropic": ("AnthropicModel",),
            "plait.models.anthropic_cache": ("AnthropicCache",),
            "plait.models.base": (
                "CallClass",
                "Model",
                "ModelRequest",
                "ModelResponse",
                "ModelSettings",
                "OutputSchema",
                "Reasoning",
                "ReasoningDelta",
                "ResponseComplete",
                "StreamEvent",
                "TextDelta",
                "ToolCallDelta",
                "collect_stream",
            ),
            "plait.models.fallback": ("FallbackModel", "FallbackNotice"),
            "plait.models.language_model": (
                "LanguageModelMiddleware",
                "WrappedModel",
                "wrap_model",
            ),
            "plait.models.openai": ("OpenAIChatModel",),
            "plait.models.openai_cache": ("OpenAIPromptCache",),
            "plait.models.openai_responses": ("OpenAIResponsesModel",),
            "plait.models.registry": ("resolve_model",),
            "plait.models.retrying": ("Backoff",),
            "plait.models.scripted": (
                "FunctionModel",
                "InvalidScriptEntry",
                "ScriptedModel",
                "ScriptExhausted",
                "ScriptIncomplete",
            ),
            "plait.models.timeouts": ("ModelTimeouts",),
        },
    )
