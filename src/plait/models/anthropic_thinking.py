"""Extended thinking for the Anthropic Messages API: :class:`~plait.models.base.Reasoning` as the
request's ``thinking`` field, checked before the request is sent.

=============================  =============================================================
``Reasoning``                  Messages API
=============================  =============================================================
``None`` (no setting)          no ``thinking`` field: the model's default
``enabled=False``              ``{"type": "disabled"}``
``budget_tokens=N``            ``{"type": "enabled", "budget_tokens": N}``; N at least
                               :data:`MIN_BUDGET_TOKENS` (1,024) and below ``max_tokens``
``effort`` (no budget)         a budget from :data:`EFFORT_BUDGETS`: ``minimal`` 1,024,
                               ``low`` 2,048, ``medium`` 8,192, ``high`` 16,384; neither
                               effort nor budget: ``medium``
``interleaved=True``           the ``anthropic-beta: interleaved-thinking-2025-05-14`` header
                               (thinking between tool calls)
``summary``                    ignored (OpenAI's; Claude's thinking is readable as it is)
=============================  =============================================================

``max_tokens`` includes the thinking budget. When the request sets ``max_tokens`` the budget must
be below it (a :class:`~plait.errors.ConfigurationError` otherwise); when it does not, the
request gets the budget plus the model's default ``max_tokens``, so turning thinking on does not
eat the answer's room. With thinking on, the API refuses a ``temperature`` other than 1 and a
``tool_choice`` that forces a tool (``required`` or a tool name): both are configuration errors
here, before anything is sent.
"""

from __future__ import annotations

from typing import Any

from plait.errors import ConfigurationError
from plait.models.base import ModelRequest

__all__ = ["EFFORT_BUDGETS", "INTERLEAVED_BETA", "MIN_BUDGET_TOKENS", "thinking_settings"]

MIN_BUDGET_TOKENS = 1024
INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"
EFFORT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}


def thinking_settings(
    request: ModelRequest, default_max_tokens: int
) -> tuple[dict[str, Any] | None, int, dict[str, str]]:
    """``(thinking field or None, max_tokens, extra headers)`` for ``request``."""
    reasoning = request.reasoning
    max_tokens = request.max_tokens or default_max_tokens
    if reasoning is None:
        return None, max_tokens, {}
    if not reasoning.enabled:
        return {"type": "disabled"}, max_tokens, {}
    budget = reasoning.budget_tokens
    if budget is None:
        budget = EFFORT_BUDGETS[reasoning.effort or "medium"]
    if budget < MIN_BUDGET_TOKENS:
        raise ConfigurationError(
            f"Anthropic thinking needs budget_tokens of at least {MIN_BUDGET_TOKENS:,}, got "
            f"{budget:,}: raise Reasoning(budget_tokens=...)."
        )
    if request.max_tokens is None:
        max_tokens = budget + default_max_tokens
    elif budget >= max_tokens:
        raise ConfigurationError(
            f"Anthropic thinking's budget_tokens ({budget:,}) must be below max_tokens "
            f"({max_tokens:,}), which includes it: raise max_tokens or lower the budget."
        )
    if request.temperature is not None and request.temperature != 1:
        raise ConfigurationError(
            f"Anthropic refuses temperature={request.temperature} with thinking on (only 1 is "
            "allowed): leave temperature unset, or turn thinking off (Reasoning(enabled=False))."
        )
    if request.tools and request.tool_choice not in (None, "auto", "none"):
        raise ConfigurationError(
            f"Anthropic refuses tool_choice={request.tool_choice!r} with thinking on (only "
            "'auto' or 'none'): drop the forced tool choice, or turn thinking off."
        )
    headers = {"anthropic-beta": INTERLEAVED_BETA} if reasoning.interleaved else {}
    return {"type": "enabled", "budget_tokens": budget}, max_tokens, headers
