"""Real MCP servers (tests/support/mcp_server.py, FastMCP) over stdio and Streamable HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp_server import HttpServerProcess


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """A FastMCP server over Streamable HTTP on 127.0.0.1, for the module's tests."""
    server = HttpServerProcess()
    server.start()
    try:
        yield server.url
    finally:
        server.kill()


@pytest.fixture
def http_process() -> Iterator[HttpServerProcess]:
    server = HttpServerProcess()
    server.start()
    try:
        yield server
    finally:
        server.kill()
