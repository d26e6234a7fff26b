"""``.mcp.json`` as Claude Code, Cursor and their peers write it.

::

    {"mcpServers": {
        "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                   "env": {"ROOT": "${PROJECT_ROOT:-.}"}},
        "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}}}

    read_mcp_json(Path(".mcp.json"))
    # DotMcp(servers={"files": {"command": [...], "env": {...}}, "github": {"url": ..., ...}},
    #        notes=[])

An entry is a stdio server (``command``, optional ``args``, ``env``, ``cwd``; ``"type":
"stdio"`` or no ``type``) or a Streamable HTTP one (``"type": "http"``, ``url``, optional
``headers``). ``${VAR}`` and ``${VAR:-default}`` are expanded, as Claude Code does, in
``command``, ``args``, ``env``, ``cwd``, ``url`` and ``headers``; a ``${VAR}`` that is not set and
has no default is an error naming the key. The legacy SSE transport (``"type": "sse"``) is not
spoken by plait: such an entry is left out with a note, and so is an entry switched off with
``"disabled": true``. Keys other tools read (``description``, ``timeout``, ``autoApprove``, …) are
ignored.

Anything else that is wrong (not JSON, not UTF-8, larger than :data:`MAX_MCP_JSON_BYTES`,
``mcpServers`` not an object, an entry with neither ``command`` nor ``url``, a value of the wrong
type) raises :class:`~plait.mcp.errors.McpConfigError` whose message starts with the file and
names the key (``.mcp.json: mcpServers.github.headers: ...``). Nothing here imports the SDK.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plait.jsonfile import MAX_JSON_FILE_BYTES, JsonFileError, read_json_object
from plait.mcp.errors import McpConfigError

__all__ = ["MAX_MCP_JSON_BYTES", "DotMcp", "expand_variables", "read_mcp_json"]

MAX_MCP_JSON_BYTES = MAX_JSON_FILE_BYTES
"""A ``.mcp.json`` larger than this (1 MiB) is refused: no real one is that large."""

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_IGNORED_TYPES = {
    "sse": 'the legacy SSE transport; plait speaks Streamable HTTP ("type": "http")',
}


@dataclass(slots=True)
class DotMcp:
    """What one ``.mcp.json`` holds: ``servers`` as ``{name: settings}`` (the keys of
    :class:`~plait.mcp.McpServer`, as :func:`~plait.mcp.servers_from_mapping` takes them), in file
    order, and ``notes`` on the entries left out."""

    path: Path
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def expand_variables(text: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with each ``${VAR}`` replaced by the variable's value and each
    ``${VAR:-default}`` by the value, or ``default`` when the variable is unset or empty (the
    shell's ``:-``). An unset ``${VAR}`` with no default raises :class:`ValueError` naming it
    (``where`` says whose value it was)."""
    env = os.environ if environ is None else environ

    def value(match: re.Match[str]) -> str:
        name, default = match[1], match[2]
        found = env.get(name)
        if found:
            return found
        if default is not None:
            return default
        if found is not None:
            return found
        raise ValueError(
            f"{where}: ${{{name}}} is not set; export {name}=..., or write ${{{name}:-default}}"
        )

    return _VARIABLE.sub(value, text)


def read_mcp_json(path: Path, environ: Mapping[str, str] | None = None) -> DotMcp:
    """The servers of the ``.mcp.json`` at ``path`` (see the module docstring). Raises
    :class:`~plait.mcp.errors.McpConfigError` starting with ``path`` and naming the key."""
    found = DotMcp(path)
    document = _document(path)
    servers = document.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise _error(path, "mcpServers", "must be an object of {name: server}")
    for name, entry in servers.items():
        key = f"mcpServers.{name}"
        if not isinstance(entry, dict):
            raise _error(path, key, "must be an object (command/args/env, or type/url/headers)")
        try:
            settings = _entry(entry, key, environ)
        except ValueError as exc:
            raise McpConfigError(f"{path}: {exc}.") from None
        if isinstance(settings, str):
            found.notes.append(f"{path}: MCP server {name!r} left out: {settings}.")
        else:
            found.servers[str(name)] = settings
    return found


def _document(path: Path) -> dict[str, Any]:
    try:
        return read_json_object(path, max_bytes=MAX_MCP_JSON_BYTES, shape='{"mcpServers": {...}}')
    except JsonFileError as exc:
        raise McpConfigError(str(exc)) from None


def _entry(
    entry: dict[str, Any], key: str, environ: Mapping[str, str] | None
) -> dict[str, Any] | str:
    """One server's settings, or why it is left out (a note)."""
    if entry.get("disabled") is True:
        return 'it is marked "disabled": true'
    kind = entry.get("type", "stdio" if "command" in entry else "http" if "url" in entry else None)
    if kind in _IGNORED_TYPES:
        return f'"type": "{kind}" is {_IGNORED_TYPES[kind]}'
    if kind == "stdio":
        command = _text(entry.get("command"), f"{key}.command", environ)
        args = entry.get("args", [])
        if not isinstance(args, list):
            raise ValueError(f"{key}.args: must be a list of strings, got {_shown(args)}")
        argv = [command, *(_text(a, f"{key}.args[{i}]", environ) for i, a in enumerate(args))]
        settings: dict[str, Any] = {"command": argv}
        if "env" in entry:
            settings["env"] = _strings(entry["env"], f"{key}.env", environ)
        if "cwd" in entry:
            settings["cwd"] = _text(entry["cwd"], f"{key}.cwd", environ)
        return settings
    if kind in ("http", "streamable-http", "streamableHttp"):
        url = _text(entry.get("url"), f"{key}.url", environ)
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{key}.url: must start with http:// or https://, got {url!r}")
        settings = {"url": url}
        if "headers" in entry:
            settings["headers"] = _strings(entry["headers"], f"{key}.headers", environ)
        return settings
    if kind is None:
        raise ValueError(f"{key}: give 'command' (a stdio server) or 'type': 'http' and 'url'")
    raise ValueError(f"{key}.type: {_shown(kind)} is not one of stdio, http, sse")


def _error(path: Path, key: str, problem: str) -> McpConfigError:
    return McpConfigError(f"{path}: {key}: {problem}.")


def _text(value: Any, key: str, environ: Mapping[str, str] | None) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key}: must be a non-empty string, got {_shown(value)}")
    return expand_variables(value, key, environ)


def _strings(value: Any, key: str, environ: Mapping[str, str] | None) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{key}: must be an object of strings, got {_shown(value)}")
    return {str(k): expand_variables(v, f"{key}.{k}", environ) for k, v in value.items()}


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
