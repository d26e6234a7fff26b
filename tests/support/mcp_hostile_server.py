"""A real MCP server (stdio) whose ``tools/list`` is hostile, for the MCP battery's tests.

Run as ``python mcp_hostile_server.py CASE``. It speaks MCP's JSON-RPC itself, one message a line
(no SDK: an SDK server would refuse to send these lists), answers ``initialize``, ``ping`` and
``tools/list``, and calls every tool as an echo of its ``text`` argument. Each case (see
:data:`CASES`) lists ``echo`` beside its bad tools, except ``malformed`` and ``many``, whose
whole list is unusable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

COMMAND = [sys.executable, str(Path(__file__).resolve())]
"""The command that starts this server; append a case name."""

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


def main() -> None:
    case = sys.argv[1]
    if case not in CASES:
        raise SystemExit(f"unknown case {case!r}; one of {', '.join(CASES)}")
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _answer(json.loads(line), case)
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
