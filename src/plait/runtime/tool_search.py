"""``ToolSearch``: deferred tools stay out of the request until the model searches for them.

A tool marked deferred (``@tool(deferred=True)``, ``metadata={"defer_loading": True}``) is
registered — it resolves — but is not advertised, which keeps large tool sets out of every
request. ``ToolSearch`` gives the model ``search_tools(query)``: a keyword search over the
deferred tools' names and descriptions. The tools a search returns are advertised on every later
request *while that search result is in the request's messages* (compaction that drops it
withdraws them again), the same rule skills use for the tools they disclose.

``Agent`` adds a ``ToolSearch`` at the end of its middleware when any of its tools is deferred and
none was given; place one yourself to control its position.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.errors import ConfigurationError
from plait.messages import Message, ToolMessage
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext, TurnContext
from plait.models.base import ModelRequest
from plait.tools import FunctionTool, Tool, ToolContext

__all__ = ["SEARCH_TOOLS_NAME", "ToolSearch"]

SEARCH_TOOLS_NAME = "search_tools"
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(slots=True)
class _Scan:
    """What was found in a request's messages so far (cached per turn)."""

    first_id: str | None = None
    last_id: str | None = None
    scanned: int = 0
    names: list[str] = field(default_factory=list)


def _found_names(message: Message) -> list[str]:
    if not isinstance(message, ToolMessage) or message.name != SEARCH_TOOLS_NAME:
        return []
    data = message.data
    tools = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(tools, list):  # not a result of ours (another agent's tool of that name)
        return []
    return [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]


class ToolSearch(Middleware):
    """Offer ``search_tools`` and advertise the deferred tools it found.

    ``limit`` (an int >= 1, else :class:`~plait.errors.ConfigurationError`) caps the tools one
    search returns. A ``search_tools`` result of another shape in the thread (another agent's
    tool of that name) discloses nothing.
    """

    def __init__(self, *, limit: int = 8) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(
                f"ToolSearch(limit=...) is how many tools one search returns: an int >= 1, "
                f"got {limit!r}."
            )
        self.limit = limit
        self._tool = FunctionTool(self._search, name=SEARCH_TOOLS_NAME)

    def tools(self) -> Sequence[Tool]:
        return (self._tool,)

    async def _search(self, query: str, ctx: ToolContext) -> dict[str, Any]:
        """Find tools that are available but not listed yet, by keywords in their name or
        description. The tools found can be called from the next step on."""
        words = set(_WORD.findall(query.lower()))
        scored = []
        for t in ctx.turn.registry:
            if not t.deferred:
                continue
            text = f"{t.name.replace('_', ' ')} {t.definition.description}".lower()
            score = len(words & set(_WORD.findall(text)))
            if score:
                scored.append((-score, t.name, t))
        scored.sort(key=lambda item: item[:2])
        found = [
            {"name": t.name, "description": t.definition.description}
            for _, _, t in scored[: self.limit]
        ]
        note = "Call them directly." if found else "No tool matched; try other keywords."
        return {"query": query, "tools": found, "note": note}

    def _disclosed(self, turn: TurnContext, messages: Sequence[Message]) -> list[str]:
        scan = turn.scratch.get(self)
        first = messages[0].id if messages else None
        if (
            not isinstance(scan, _Scan)
            or scan.first_id != first
            or scan.scanned > len(messages)
            or (scan.scanned and messages[scan.scanned - 1].id != scan.last_id)
        ):  # the head or the scanned part changed (compaction): scan again from the start
            scan = turn.scratch[self] = _Scan(first_id=first)
        for message in messages[scan.scanned :]:
            scan.names.extend(_found_names(message))
        scan.scanned = len(messages)
        scan.last_id = messages[-1].id if messages else None
        return scan.names

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        names = self._disclosed(ctx.turn, request.messages)
        if not names:
            return request
        advertised = {t.name for t in request.tools}
        extra = []
        for name in dict.fromkeys(names):
            found = ctx.registry.get(name)
            if found is not None and found.deferred and name not in advertised:
                extra.append(found.definition)
        return request.replace(tools=[*request.tools, *extra]) if extra else request
