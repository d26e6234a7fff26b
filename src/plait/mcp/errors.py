"""Errors of the MCP battery. Each says which server and what to do next."""

from __future__ import annotations

from plait.errors import ConfigurationError, PlaitError

__all__ = [
    "McpConfigError",
    "McpConnectError",
    "McpError",
    "McpServerClosed",
    "McpServerGone",
    "McpToolListError",
    "McpToolRejected",
]


class McpError(PlaitError):
    """Base class of the MCP battery's errors."""


class McpConfigError(McpError, ConfigurationError):
    """An MCP server or toolset was configured in a way that cannot work (a bad prefix, filter or
    command, two tools that would share a name)."""


class McpConnectError(McpError):
    """A server could not be started or did not finish ``initialize`` in time."""

    def __init__(self, server: str, reason: str, *, log_file: str | None = None) -> None:
        self.server = server
        self.reason = reason
        self.log_file = log_file
        """The file holding the server's stderr, when it has one."""
        where = (
            f"its errors are in {log_file}"
            if log_file
            else "run the command by hand to see its errors"
        )
        super().__init__(
            f"MCP server {server!r} could not be connected: {reason}. Check its command or URL "
            f"({where})."
        )


class McpToolListError(McpError):
    """A server's ``tools/list`` answer cannot be used as a whole: it is malformed (not what the
    protocol says a list of tools is) or longer than the server's ``max_tools``. A toolset
    leaves the server out of its turns, as it does an unreachable one
    (:class:`~plait.mcp.events.McpServerSkipped`), and tries it again later."""

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        super().__init__(f"MCP server {server!r} {reason}")


class McpToolRejected(McpConfigError):
    """Some of a server's tools cannot be offered: two of them end up with one name (once
    prefixed, sanitized and cut to 64 characters), one's input schema is over
    ``max_schema_chars``, or its name is taken (by an agent tool, a middleware's tool or another
    server's tool). Only ``tools`` (the server's own names) are left out, reported by
    :class:`~plait.mcp.events.McpToolsSkipped`; the server's other tools are offered."""

    def __init__(self, server: str, tools: list[str], reason: str) -> None:
        self.server = server
        self.tools = list(tools)
        self.reason = reason
        super().__init__(f"MCP server {server!r}: {reason}")


class McpServerGone(McpError):
    """The session ended while a request waited (the server exited or closed the connection).
    The next call starts a new session."""

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        super().__init__(
            f"MCP server {server!r} is not connected: {reason}. The next call restarts it."
        )


class McpServerClosed(McpError):
    """An :class:`~plait.mcp.server.McpServer` was used after its ``aclose()`` (a closed server
    never starts a new session by itself)."""

    def __init__(self, server: str) -> None:
        self.server = server
        super().__init__(
            f"MCP server {server!r} was closed (aclose()); create a new McpServer to use it "
            "again, or close it only when done."
        )
