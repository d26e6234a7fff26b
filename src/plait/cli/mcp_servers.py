"""Starting the MCP servers of a one-shot ``plait run`` before its turn.

A turn skips a server it cannot reach (a warning, the other tools go on), which suits ``plait
chat``: the next message tries again. A one-shot ``run`` has no next message, and a script
must be able to tell that a tool it counted on was missing: :func:`start_servers` connects every
server first and raises :class:`McpServerDidNotStart` (one line: the server, its command or URL,
where its log is) for the first that cannot start; ``run`` exits 1 with it.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from typing import TYPE_CHECKING, Any

from plait.errors import PlaitError, clipped

if TYPE_CHECKING:
    from plait.runtime.agent import Agent

__all__ = ["McpServerDidNotStart", "log_lines", "start_servers"]


class McpServerDidNotStart(PlaitError):
    """An MCP server of a one-shot run could not be started (or reached)."""

    def __init__(self, server: str, target: str, reason: str, log_file: str | None) -> None:
        self.server = server
        self.log_file = log_file
        where = f"; its log: {log_file}" if log_file else ""
        reason = clipped(" ".join(reason.split()), 300)
        super().__init__(
            f"MCP server {server!r} could not start ({target}): {reason}{where}. Fix its "
            "command or URL (--mcp, [mcp.*] in plait.toml or .mcp.json), or leave it out."
        )


def _servers(agent: Agent) -> list[Any]:
    from plait.mcp import McpToolset

    return [s for m in agent.middleware if isinstance(m, McpToolset) for s in m.servers]


def _target(server: Any) -> str:
    command = getattr(server.transport, "command", None)
    return shlex.join(command) if command else str(getattr(server.transport, "url", "?"))


async def start_servers(agent: Agent) -> None:
    """Connect every MCP server of ``agent`` at once (each within its ``init_timeout``); raise
    :class:`McpServerDidNotStart` for the first, in order, that fails. Nothing when the agent
    has none (plait.mcp is then not even imported)."""
    servers = _servers(agent) if "plait.mcp" in sys.modules else []
    if not servers:
        return
    from plait.mcp import McpError

    outcomes = await asyncio.gather(*(s.connect() for s in servers), return_exceptions=True)
    for server, outcome in zip(servers, outcomes, strict=True):
        if isinstance(outcome, McpError | OSError):
            reason = getattr(outcome, "reason", None) or str(outcome)
            raise McpServerDidNotStart(server.name, _target(server), reason, server.log_file)
        if isinstance(outcome, BaseException):
            raise outcome


def log_lines(agent: Agent) -> list[str]:
    """``MCP server NAME logs to PATH`` for each stdio server with a log file (``-v`` shows
    them once, before the turn)."""
    servers = _servers(agent) if "plait.mcp" in sys.modules else []
    return [f"MCP server {s.name} logs to {s.log_file}" for s in servers if s.log_file]
