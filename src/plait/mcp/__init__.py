"""MCP tools: servers over stdio or Streamable HTTP, their tools as plait tools.

Needs the ``mcp`` extra (``pip install 'plait[mcp]'``); the SDK is imported only when a session
starts. See README.md in this folder.
"""

from plait.mcp.config import parse_mcp_option, servers_from_mapping
from plait.mcp.errors import (
    McpConfigError,
    McpConnectError,
    McpError,
    McpServerClosed,
    McpServerGone,
    McpToolListError,
    McpToolRejected,
)
from plait.mcp.events import McpContentDropped, McpServerSkipped, McpToolsSkipped
from plait.mcp.server import DEFAULT_CALL_TIMEOUT, DEFAULT_INIT_TIMEOUT, McpServer, McpTool
from plait.mcp.toolset import (
    RECONNECT_SECONDS,
    RETRY_FIRST_SECONDS,
    RETRY_MAX_SECONDS,
    McpToolset,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_INIT_TIMEOUT",
    "RECONNECT_SECONDS",
    "RETRY_FIRST_SECONDS",
    "RETRY_MAX_SECONDS",
    "McpConfigError",
    "McpConnectError",
    "McpContentDropped",
    "McpError",
    "McpServer",
    "McpServerClosed",
    "McpServerGone",
    "McpServerSkipped",
    "McpTool",
    "McpToolListError",
    "McpToolRejected",
    "McpToolsSkipped",
    "McpToolset",
    "parse_mcp_option",
    "servers_from_mapping",
]
