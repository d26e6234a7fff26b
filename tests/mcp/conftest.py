"""Real MCP servers (tests/support/mcp_server.py, FastMCP) over stdio and Streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

SERVER = str(Path(__file__).parents[1] / "support" / "mcp_server.py")
HTTP_START_TIMEOUT = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """A FastMCP server over Streamable HTTP on 127.0.0.1, for the module's tests."""
    server = HttpServerProcess()
    server.start()
    try:
        yield server.url
    finally:
        server.kill()


class HttpServerProcess:
    """A FastMCP HTTP server process on a fixed port that a test can kill and start again."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, SERVER, "http", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + HTTP_START_TIMEOUT
        while True:
            try:
                httpx.get(self.url, timeout=1.0)
                return
            except httpx.TransportError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the test MCP HTTP server did not start") from None
                time.sleep(0.1)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def http_process() -> Iterator[HttpServerProcess]:
    server = HttpServerProcess()
    server.start()
    try:
        yield server
    finally:
        server.kill()
