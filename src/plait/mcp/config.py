"""Building servers from settings: ``--mcp NAME=COMMAND`` / ``--mcp NAME=URL`` and config tables.

::

    parse_mcp_option("files=npx -y @modelcontextprotocol/server-filesystem .")
    # ("files", {"command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "."]})
    servers_from_mapping({"docs": {"url": "http://127.0.0.1:8000/mcp", "timeout": 120}})
    # [<McpServer 'docs'>]

A value that starts with ``http://`` or ``https://`` is a URL; anything else is a command line,
split like a shell would (no shell runs it).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping
from typing import Any

from plait.mcp.errors import McpConfigError
from plait.mcp.server import McpServer

__all__ = ["SERVER_KEYS", "parse_mcp_option", "servers_from_mapping"]

SERVER_KEYS = frozenset(
    {"command", "url", "env", "cwd", "headers", "prefix", "allow", "block", "timeout",
     "init_timeout", "max_tools", "max_result_chars", "max_description_chars", "max_schema_chars",
     "max_message_bytes", "defer", "log_file"}
)  # fmt: skip
"""The settings one server takes (the keyword arguments of :class:`McpServer`)."""


def parse_mcp_option(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME=COMMAND...`` or ``NAME=URL`` as ``(name, settings)``; :class:`McpConfigError`
    (saying the expected form) when there is no ``=``, no name or nothing after it."""
    name, sep, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name or not value:
        raise McpConfigError(
            f"--mcp takes NAME=COMMAND or NAME=URL (e.g. files='npx -y server .'); got {text!r}."
        )
    if value.startswith(("http://", "https://")):
        return name, {"url": value}
    return name, {"command": _split(name, value)}


def servers_from_mapping(settings: Mapping[str, Any]) -> list[McpServer]:
    """One :class:`McpServer` per ``name -> settings`` item, in order.

    Settings are a mapping (or a dataclass) with the keys in :data:`SERVER_KEYS`; ``command``
    may be a list or one string (split like a shell would). ``None`` values are left out. An
    unknown key or a bad value raises :class:`McpConfigError` naming the server.
    """
    servers = []
    for name, raw in settings.items():
        if dataclasses.is_dataclass(raw) and not isinstance(raw, type):
            raw = dataclasses.asdict(raw)
        if not isinstance(raw, Mapping):
            raise McpConfigError(f"MCP server {name!r}: settings must be a table, got {raw!r}.")
        values = {k: v for k, v in raw.items() if v is not None}
        unknown = sorted(set(values) - SERVER_KEYS)
        if unknown:
            raise McpConfigError(
                f"MCP server {name!r}: unknown setting(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(SERVER_KEYS))}."
            )
        if isinstance(values.get("command"), str):
            values["command"] = _split(name, values["command"])
        try:
            servers.append(McpServer(str(name), **values))
        except TypeError as exc:
            raise McpConfigError(f"MCP server {name!r}: {exc}") from None
    return servers


def _split(name: str, command: str) -> list[str]:
    try:
        parts = shlex.split(command)
    except ValueError as exc:
        raise McpConfigError(f"MCP server {name!r}: cannot split the command: {exc}.") from None
    if not parts:
        raise McpConfigError(f"MCP server {name!r}: the command is empty.")
    return parts
