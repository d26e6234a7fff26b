"""Events the guards battery emits. The default guards' events (``ToolCallRejected``,
``ToolCallRepaired``, ``RepetitionDetected``) live in :mod:`plait.runtime.events`."""

from __future__ import annotations

from dataclasses import dataclass

from plait.middleware.context import Event

__all__ = ["LimitReached"]


@dataclass(slots=True, kw_only=True)
class LimitReached(Event):
    """A limit refused a call or ended the turn."""

    kind: str
    limit: float
    type: str = "limit_reached"
