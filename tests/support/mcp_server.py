"""A real MCP server for the MCP battery's tests, written with the SDK's FastMCP.

Run as ``python mcp_server.py stdio`` or ``python mcp_server.py http PORT`` (127.0.0.1 only).
``MCP_TEST_START_DELAY`` (seconds) delays startup, to test connect timeouts and cancellation.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import sys
import time

import anyio
import httpx
from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)
from pydantic import AnyUrl, BaseModel

STDIO = [sys.executable, __file__, "stdio"]
"""The command that starts this server over stdio."""

NO_TOOLS = [sys.executable, __file__, "no-tools"]
"""A server (over stdio) without the tools capability: ``tools/list`` is "Method not found"."""

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

WAV = b"RIFF\x26\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00"
WAV += b"\x40\x1f\x00\x00\x01\x00\x08\x00data\x02\x00\x00\x00\x80\x80"
"""A two-sample 8 kHz mono WAV clip."""

PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
"""A (minimal) PDF document."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class PromiseBreaker(FastMCP):
    """Lists ``no_structure`` with an output schema its function never honours (the SDK server
    then refuses the result itself: an isError result the client must pass on)."""

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        for item in tools:
            if item.name == "no_structure":
                item.outputSchema = Weather.model_json_schema()
        return tools


server = PromiseBreaker("plait-test", host="127.0.0.1")
_counter = {"calls": 0}


class Weather(BaseModel):
    city: str
    celsius: float


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(name="b_echo")
def b_echo(text: str) -> str:
    """Echo again, under a name with an underscore (to test prefixed-name collisions)."""
    return text


@server.tool()
def count() -> str:
    """How many times this process has served count (server-side state)."""
    _counter["calls"] += 1
    return f"{_counter['calls']} in pid {os.getpid()}"


@server.tool()
def weather(city: str) -> Weather:
    """Structured output: the weather in a city."""
    return Weather(city=city, celsius=21.5)


@server.tool(structured_output=False)
def no_structure(city: str) -> str:
    """Listed with Weather as its output schema (below), but returns text only."""
    return f"sunny in {city}"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "finally"


@server.tool()
def crash() -> str:
    """Exit the server process at once, mid-call."""
    os._exit(3)


@server.tool()
def fail() -> str:
    """Raise: the client sees an isError result."""
    raise ValueError("the disk is on fire")


@server.tool(structured_output=False)
def picture() -> list[ImageContent | TextContent | EmbeddedResource]:
    """Return an image, a text block and an embedded text resource."""
    return [
        Image(data=PNG, format="png").to_image_content(),
        TextContent(type="text", text="a one-pixel picture"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri=AnyUrl("file:///notes.txt"), text="notes", mimeType="text/plain"
            ),
        ),
    ]


@server.tool(structured_output=False)
def media() -> list[ContentBlock]:
    """Return text, an image, an audio clip, two embedded blob resources (a PDF and a PNG)
    and a resource link."""
    return [
        TextContent(type="text", text="here is everything"),
        ImageContent(type="image", data=_b64(PNG), mimeType="image/png"),
        AudioContent(type="audio", data=_b64(WAV), mimeType="audio/wav"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri=AnyUrl("file:///docs/q3%20report.pdf"),
                blob=_b64(PDF),
                mimeType="application/pdf",
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri=AnyUrl("https://example.com/img/logo.png"), blob=_b64(PNG), mimeType="image/png"
            ),
        ),
        ResourceLink(
            type="resource_link",
            uri=AnyUrl("file:///data/big.csv"),
            name="big dataset",
            mimeType="text/csv",
        ),
    ]


@server.tool(structured_output=False)
def bad_media() -> list[ContentBlock]:
    """Return text, then images that cannot be parts (GIF bytes called PNG, base64 that is not
    base64, a TIFF, a "PDF" that is not one), then one good PNG."""
    return [
        TextContent(type="text", text="still here"),
        ImageContent(type="image", data=_b64(b"GIF89a\x01\x00\x01\x00"), mimeType="image/png"),
        ImageContent(type="image", data="not base64 at all!", mimeType="image/png"),
        ImageContent(type="image", data=_b64(b"II*\x00\x08\x00\x00\x00"), mimeType="image/tiff"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri=AnyUrl("file:///fake.pdf"), blob=_b64(b"hello"), mimeType="application/pdf"
            ),
        ),
        ImageContent(type="image", data=_b64(PNG), mimeType="image/png"),
    ]


@server.tool()
async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
    """Add a tool named 'extra' and tell the client its tool list changed."""

    def extra() -> str:
        """A tool added at run time."""
        return "extra!"

    server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


HTTP_START_TIMEOUT = 30.0
"""Seconds a test waits for the HTTP server to answer."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HttpServerProcess:
    """A FastMCP HTTP server process on a fixed port that a test can kill and start again."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "http", str(self.port)],
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


async def _serve_without_tools() -> None:
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    bare: Server[object, object] = Server("plait-test-no-tools")
    async with stdio_server() as (read, write):
        await bare.run(read, write, bare.create_initialization_options())


def main() -> None:
    delay = float(os.environ.get("MCP_TEST_START_DELAY", "0"))
    if delay:
        time.sleep(delay)
    if sys.argv[1] == "http":
        server.settings.port = int(sys.argv[2])
        server.run("streamable-http")
    elif sys.argv[1] == "no-tools":
        anyio.run(_serve_without_tools)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
