"""``Limits``: the bounds on one turn an :class:`~plait.runtime.agent.Agent` holds (re-exported
from :mod:`plait.runtime.agent` and :mod:`plait.runtime`)."""

from __future__ import annotations

from dataclasses import dataclass

from plait.errors import ConfigurationError
from plait.models.timeouts import DEFAULT_MODEL_TIMEOUT
from plait.tools import check_timeout

__all__ = ["DEFAULT_TOOL_TIMEOUT", "Limits"]

DEFAULT_TOOL_TIMEOUT = 300.0
"""Seconds a tool call may run by default (``Limits.tool_timeout``)."""


@dataclass(slots=True, frozen=True)
class Limits:
    """Bounds on one turn. ``model_calls_per_turn`` is the number of model calls before the turn
    ends with :class:`~plait.errors.LimitExceeded` (``kind="model_calls_per_turn"``; the same
    limit :class:`~plait.guards.LimitsMiddleware` can set lower, with an event);
    ``max_concurrent_tools`` bounds how many tool calls of one response run at once;
    ``tool_timeout`` is how many seconds a tool call may run before it is cancelled and answered
    with a :class:`~plait.errors.ToolTimeoutError` result (default 300; ``math.inf`` for none; a
    tool's own ``@tool(timeout=...)`` wins); ``model_timeout`` is how many seconds one model
    call (a stream to its last event included) may take before it is cancelled and the turn
    fails with :class:`~plait.errors.ModelTimeoutError` (default 600; ``math.inf`` for none).
    It applies to models without a deadline of their own: the OpenAI and Anthropic adapters
    keep theirs (:class:`~plait.models.ModelTimeouts`) and are not timed twice."""

    model_calls_per_turn: int = 50
    max_concurrent_tools: int = 8
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    model_timeout: float = DEFAULT_MODEL_TIMEOUT

    def __post_init__(self) -> None:
        if self.model_calls_per_turn < 1 or self.max_concurrent_tools < 1:
            raise ConfigurationError("Limits must be at least 1.")
        check_timeout(self.tool_timeout, "Limits.tool_timeout")
        check_timeout(self.model_timeout, "Limits.model_timeout")
