"""Orchestrator middleware: the contract, the stack and its checked ordering, the turn/dispatch
contexts, and model hooks (a plain function as ``after_model_call`` middleware)."""

from plait.middleware.base import SEAMS, Middleware, ModelHandler, Next, SkipToolCall, ToolHandler
from plait.middleware.context import DispatchContext, Event, EventSink, TurnContext
from plait.middleware.model_hooks import ModelHook, ModelHookMiddleware
from plait.middleware.ordering import Placement
from plait.middleware.stack import MiddlewareStack

__all__ = [
    "SEAMS",
    "DispatchContext",
    "Event",
    "EventSink",
    "Middleware",
    "MiddlewareStack",
    "ModelHandler",
    "ModelHook",
    "ModelHookMiddleware",
    "Next",
    "Placement",
    "SkipToolCall",
    "ToolHandler",
    "TurnContext",
]
