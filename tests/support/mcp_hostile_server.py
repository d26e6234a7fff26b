"""A real MCP server (stdio) whose ``tools/list`` is hostile, for the MCP battery's tests.

Run as ``python mcp_hostile_server.py CASE`` (stdio) or ``... CASE http PORT`` (Streamable HTTP
on 127.0.0.1, JSON responses, no session id). It speaks MCP's JSON-RPC itself (no SDK: an SDK
server would refuse to send these lists): one message a line on stdio, one a POST over HTTP. It
answers ``initialize``, ``ping`` and
``tools/list``, and calls every tool as an echo of its ``text`` argument. Each case (see
:data:`CASES`) lists ``echo`` beside its bad tools; the whole list of ``malformed``,
``nameless``, ``pages`` and ``many`` is unusable.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

COMMAND = [sys.executable, str(Path(__file__).resolve())]
"""The command that starts this server; append a case name."""

HTTP_START_TIMEOUT = 30.0
"""Seconds :func:`serve_http` waits for the HTTP server to answer."""

TEXT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

LONG = "x" * 70
"""A tool name over 64 characters: ``LONG + "_a"`` and ``LONG + "_b"`` are one name once cut."""


def _tool(name: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": schema or TEXT_SCHEMA}


HUGE_SCHEMA = {
    "type": "object",
    "properties": {f"field_{i}": {"type": "string", "description": "y" * 200} for i in range(120)},
}
"""An input schema of about 28,000 characters, over the default ``max_schema_chars``."""

CASES: dict[str, Any] = {
    "malformed": {"tools": "notalist"},
    "nameless": {"tools": [_tool("echo"), {"description": "no name", "inputSchema": TEXT_SCHEMA}]},
    "pages": {"tools": [_tool("echo")], "nextCursor": "again"},  # the same page, for ever
    "sanitize": {"tools": [_tool("echo"), _tool("a.b"), _tool("a b")]},
    "cut": {"tools": [_tool("echo"), _tool(LONG + "_a"), _tool(LONG + "_b")]},
    "many": {"tools": [_tool(f"t{i}") for i in range(501)]},
    "schema": {"tools": [_tool("echo"), _tool("big", HUGE_SCHEMA)]},
    "search_tools": {"tools": [_tool("echo"), _tool("search_tools"), _tool("tools")]},
}
"""What ``tools/list`` answers, per case."""


def _answer(message: dict[str, Any], case: str) -> dict[str, Any] | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:  # a notification (initialized, cancelled): nothing to answer
        return None
    if method == "initialize":
        result: Any = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": f"hostile-{case}", "version": "1"},
        }
    elif method == "tools/list":
        result = CASES[case]
    elif method == "tools/call":
        text = str(message["params"].get("arguments", {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": "Method not found"}
        return {"jsonrpc": "2.0", "id": ident, "error": error}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _http_handler(case: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            answer = _answer(json.loads(body), case)
            if answer is None:
                self.send_response(202)
                self.end_headers()
                return
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # no server-initiated stream
            self.send_response(405)
            self.end_headers()

        def do_DELETE(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@contextlib.contextmanager
def serve_http(case: str) -> Iterator[str]:
    """Run the server for ``case`` over HTTP on a free port; yields its URL."""
    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    process = subprocess.Popen([*COMMAND, case, "http", str(port)])
    try:
        deadline = time.monotonic() + HTTP_START_TIMEOUT
        while True:
            try:
                httpx.get(url, timeout=1.0)  # 405: up
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the hostile MCP HTTP server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.kill()
        process.wait(timeout=10)


def main() -> None:
    case = sys.argv[1]
    if case not in CASES:
        raise SystemExit(f"unknown case {case!r}; one of {', '.join(CASES)}")
    if sys.argv[2:3] == ["http"]:
        address = ("127.0.0.1", int(sys.argv[3]))
        ThreadingHTTPServer(address, _http_handler(case)).serve_forever()
        return
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _answer(json.loads(line), case)
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
