"""Typed events of the MCP battery, emitted through ``TurnContext.emit``.

They reach a streaming caller live and a ``run`` caller in ``RunResult.events``; ``plait run``
and ``plait chat`` print them as a warning line.
"""

from __future__ import annotations

from dataclasses import dataclass

from plait.middleware.context import Event

__all__ = ["McpServerSkipped"]


@dataclass(slots=True, kw_only=True)
class McpServerSkipped(Event):
    """A server's tools are left out of this turn because it could not be reached.

    ``server`` names it; ``reason`` is the last failure (a connect error, a ``tools/list`` that
    did not answer in time, a session that ended). ``failures`` counts the failures in a row;
    ``retry_in`` is how many seconds until the next attempt (the first turn that starts after
    that tries again; see :data:`~plait.mcp.toolset.RETRY_FIRST_SECONDS`). The turn goes on
    with the other servers' tools.
    """

    server: str
    reason: str
    failures: int
    retry_in: float
    type: str = "mcp_server_skipped"
