"""Orchestrator middleware: the contract, the stack, and the turn/dispatch contexts."""

from plait.middleware.base import SEAMS, Middleware, ModelHandler, Next, SkipToolCall, ToolHandler
from plait.middleware.context import DispatchContext, Event, EventSink, TurnContext
from plait.middleware.stack import MiddlewareStack

__all__ = [
    "SEAMS",
    "DispatchContext",
    "Event",
    "EventSink",
    "Middleware",
    "MiddlewareStack",
    "ModelHandler",
    "Next",
    "SkipToolCall",
    "ToolHandler",
    "TurnContext",
]
