"""Errors of the MCP battery. Each says which server and what to do next."""

from __future__ import annotations

from plait.errors import ConfigurationError, PlaitError

__all__ = ["McpConfigError", "McpConnectError", "McpError", "McpServerClosed", "McpServerGone"]


class McpError(PlaitError):
    """Base class of the MCP battery's errors."""


class McpConfigError(McpError, ConfigurationError):
    """An MCP server or toolset was configured in a way that cannot work (a bad prefix, filter or
    command, two tools that would share a name)."""


class McpConnectError(McpError):
    """A server could not be started or did not finish ``initialize`` in time."""

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        super().__init__(
            f"MCP server {server!r} could not be connected: {reason}. Check its command or URL "
            "(run the command by hand to see its errors)."
        )


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
