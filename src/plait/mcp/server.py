"""``McpServer``: one MCP server's settings, its connection, and its tools as plait tools.

::

    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "."]
    async with McpServer("files", command=command) as files:
        tools = await files.list_tools()          # [McpTool 'files_read_file', ...]

Every tool name is ``<prefix>_<tool>`` (the prefix defaults to the server's name and cannot be
empty), so two servers never collide silently. ``allow`` (names to keep; ``None`` keeps all) and
``block`` (names to drop) filter by the server's own names. The list is cached and fetched again
only after the server sends ``notifications/tools/list_changed`` (or the session restarts).

The connection is made on first use. A session that died (the process exited, the HTTP session
ended) is started again on the next call; the call that saw it die returns an error result. Each
call has ``timeout`` seconds (default :data:`DEFAULT_CALL_TIMEOUT`); a call that times out is
abandoned and the session stays up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Self

from plait.errors import ToolError, ToolTimeoutError
from plait.mcp.client import CLOSE_TIMEOUT, HttpTransport, McpClient, RemoteTool, StdioTransport
from plait.mcp.errors import (
    McpConfigError,
    McpError,
    McpServerClosed,
    McpToolListError,
    McpToolRejected,
)
from plait.mcp.events import McpContentDropped
from plait.mcp.results import DEFAULT_MAX_RESULT_CHARS, plait_result
from plait.mcp.stdio import DEFAULT_MAX_MESSAGE_BYTES
from plait.tools import Tool, ToolContext, ToolDefinition

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_INIT_TIMEOUT",
    "DEFAULT_MAX_DESCRIPTION_CHARS",
    "DEFAULT_MAX_SCHEMA_CHARS",
    "DEFAULT_MAX_TOOLS",
    "McpServer",
    "McpTool",
]

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds one tool call may take (``McpServer(timeout=...)``)."""

DEFAULT_INIT_TIMEOUT = 30.0
"""Seconds starting a server plus ``initialize`` (or one ``tools/list``) may take."""

DEFAULT_MAX_TOOLS = 500
"""Tools one server may list (before ``allow``/``block``: the bound is on what is fetched); a
longer list is a :class:`~plait.mcp.errors.McpToolListError` (a toolset skips the server)."""

DEFAULT_MAX_DESCRIPTION_CHARS = 2_000
"""Characters of a tool's description sent to the model (a longer one is cut with a note): a
description rides along in every request, so one server cannot fill the context with it."""

DEFAULT_MAX_SCHEMA_CHARS = 20_000
"""Characters of a tool's input schema (as compact JSON) sent to the model: like a description it
rides along in every request; a tool with a longer schema is left out (a
:class:`~plait.mcp.errors.McpToolRejected` in :attr:`McpServer.rejected_tools`: a schema cannot be
cut and stay valid, so block the tool or raise ``max_schema_chars``)."""

_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


class McpTool(Tool):
    """A server's tool as a plait tool; calls go through the server's session."""

    def __init__(self, server: McpServer, remote: RemoteTool, name: str) -> None:
        metadata = {"defer_loading": True} if server.defer else {}
        description = remote.description
        limit = server.max_description_chars
        if len(description) > limit:
            description = f"{description[:limit]} [description cut at {limit} characters]"
        schema = dict(remote.input_schema)
        size = len(json.dumps(schema, separators=(",", ":"), default=str))
        if size > server.max_schema_chars:
            raise McpToolRejected(
                server.name,
                [remote.name],
                f"tool {remote.name!r} has an input schema of {size:,} characters, more than "
                f"max_schema_chars={server.max_schema_chars:,} (it would be sent with every "
                "request); block the tool or raise max_schema_chars.",
            )
        super().__init__(ToolDefinition(name, description, schema, metadata))
        self.server = server
        self.remote = remote
        # The server enforces its own, precise timeout; this backstop covers a restart too.
        self.timeout = server.timeout + server.init_timeout + 5.0

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        notes: list[str] = []
        remote = self.remote.name
        result = await self.server.call(remote, args, tool=self.name, on_drop=notes.append)
        if notes:
            event = McpContentDropped(
                server=self.server.name, tool=self.name, call_id=ctx.call.id, notes=notes
            )
            ctx.turn.emit(event)
        return result


class McpServer:
    """An MCP server over stdio (``command``: program and arguments) or Streamable HTTP
    (``url``); exactly one of them.

    ``env`` adds variables to a stdio server's (safe, minimal) environment; ``headers`` are sent
    to an HTTP server. ``timeout`` bounds a tool call, ``init_timeout`` a (re)start and a
    ``tools/list``; ``max_tools`` bounds the list; ``max_result_chars`` the text of a result;
    ``max_description_chars`` each tool's description; ``max_schema_chars`` each tool's input
    schema (a tool with a longer one is left out, see :attr:`rejected_tools`);
    ``max_message_bytes`` one message from the server (a stdio line, an HTTP response or event; a
    longer one ends the session). ``log_file`` takes a stdio server's stderr (bounded: see
    :mod:`plait.mcp.stdio`) instead of this process's stderr. Close it with :meth:`aclose` or
    ``async with``; an
    :class:`~plait.runtime.Agent` never closes servers it was given. A closed server stays
    closed: using it again raises :class:`~plait.mcp.errors.McpServerClosed` (create a new one).
    """

    def __init__(
        self,
        name: str,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        allow: Iterable[str] | None = None,
        block: Iterable[str] = (),
        timeout: float = DEFAULT_CALL_TIMEOUT,
        init_timeout: float = DEFAULT_INIT_TIMEOUT,
        max_tools: int = DEFAULT_MAX_TOOLS,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
        max_schema_chars: int = DEFAULT_MAX_SCHEMA_CHARS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        defer: bool = False,
        log_file: str | None = None,
    ) -> None:
        _require_sdk(name)
        self.name = name
        self.prefix = _check_prefix(name if prefix is None else prefix, name)
        if max_message_bytes < 1024:
            raise McpConfigError(f"MCP server {name!r}: max_message_bytes must be >= 1024.")
        self.transport = _transport(name, command, url, env, cwd, headers, max_message_bytes)
        if log_file is not None:
            if not isinstance(self.transport, StdioTransport) or not isinstance(log_file, str):
                raise McpConfigError(
                    f"MCP server {name!r}: log_file (a path) applies to command= servers only."
                )
            self.transport = dataclasses.replace(self.transport, log_file=log_file)
        self.allow = None if allow is None else frozenset(_names(allow, "allow", name))
        self.block = frozenset(_names(block, "block", name))
        self.timeout = _seconds(timeout, "timeout", name)
        self.init_timeout = _seconds(init_timeout, "init_timeout", name)
        if min(max_tools, max_result_chars, max_description_chars, max_schema_chars) < 1:
            raise McpConfigError(
                f"MCP server {name!r}: max_tools, max_result_chars, max_description_chars and "
                "max_schema_chars must be >= 1."
            )
        self.max_description_chars = max_description_chars
        self.max_schema_chars = max_schema_chars
        self.max_tools = max_tools
        self.max_result_chars = max_result_chars
        if not isinstance(defer, bool):
            raise McpConfigError(f"MCP server {name!r}: defer must be true or false.")
        self.defer = defer
        self._client: McpClient | None = None
        # Dead clients whose owner may still be closing its transport: kept (a task nobody
        # references can be garbage collected mid-run) and awaited by aclose().
        self._retired: list[McpClient] = []
        self._tools: list[McpTool] | None = None
        self._rejected: list[McpToolRejected] = []
        self._closed = False
        self.restarts = 0
        """How many times a dead session was started again."""

    def __repr__(self) -> str:
        return f"<McpServer {self.name!r}>"

    @property
    def log_file(self) -> str | None:
        """Where a stdio server's stderr goes (``None``: this process's stderr, or HTTP)."""
        return getattr(self.transport, "log_file", None)

    async def connect(self) -> None:
        """Start the session now (it otherwise starts on first use); restarts a dead one.
        Raises :class:`~plait.mcp.errors.McpConnectError`."""
        await self._live_client().connect()

    async def list_tools(self) -> list[McpTool]:
        """The server's tools after filtering, prefixed; cached until the server says its list
        changed or the session restarts. Tools that cannot be offered (two that end up with one
        name, an input schema over ``max_schema_chars``) are left out and described in
        :attr:`rejected_tools`. Raises :class:`~plait.mcp.errors.McpToolListError` if the answer
        is malformed or lists more than ``max_tools`` tools,
        :class:`~plait.mcp.errors.McpConnectError` if the server cannot be started, and
        :class:`McpError` naming the server if ``tools/list`` fails or takes longer than
        ``init_timeout``."""
        client = self._live_client()
        if self._tools is None:
            remote = await self._list_remote(client)
            if len(remote) > self.max_tools:
                raise McpToolListError(
                    self.name,
                    f"lists more than max_tools={self.max_tools} tools; raise max_tools (the "
                    "bound is on the list as fetched; allow=[...] then keeps the ones you "
                    "need).",
                )
            self._tools, self._rejected = self._wrap(remote)
        return list(self._tools)

    @property
    def rejected_tools(self) -> list[McpToolRejected]:
        """The tools the last :meth:`list_tools` left out, one error per cause (its ``tools``,
        the server's own names, and its ``reason``); empty before the list is fetched."""
        return list(self._rejected)

    async def _list_remote(self, client: McpClient) -> list[RemoteTool]:
        """``tools/list``, with its failures as plait errors naming the server."""
        try:
            return await client.list_tools(self.max_tools)
        except TimeoutError:
            raise McpError(
                f"MCP server {self.name!r} did not answer tools/list within "
                f"{self.init_timeout:g} s; raise its init_timeout if it is slow."
            ) from None
        except McpError:
            raise
        except Exception as exc:
            from mcp.shared.exceptions import McpError as SdkError

            if isinstance(exc, SdkError):
                raise McpError(
                    f"MCP server {self.name!r} refused tools/list ({exc}); check that it serves "
                    "tools, or remove it from the configuration."
                ) from exc
            raise

    async def call(
        self,
        remote_name: str,
        args: Mapping[str, Any],
        *,
        tool: str,
        on_drop: Callable[[str], None] | None = None,
    ) -> Any:
        """Call the server's tool ``remote_name``; the plait result (see
        :mod:`plait.mcp.results`: text, or ``[text, *parts]``). Every failure raises a
        :class:`ToolError` the model can read (a timeout a :class:`ToolTimeoutError`);
        ``on_drop`` gets the note for each block that could not become a part."""
        try:
            outcome = await self._live_client().call_tool(remote_name, args, self.timeout)
        except TimeoutError:
            raise ToolTimeoutError(tool, self.timeout) from None
        except McpError as exc:
            raise ToolError(str(exc)) from exc
        except RuntimeError as exc:  # the SDK refused the result (output schema)
            raise ToolError(f"Tool {tool!r} returned an invalid result: {exc}") from exc
        except Exception as exc:
            from mcp.shared.exceptions import McpError as SdkError

            if isinstance(exc, SdkError):
                raise ToolError(f"Tool {tool!r} failed on the server: {exc}") from exc
            raise
        return plait_result(outcome, tool=tool, max_chars=self.max_result_chars, on_drop=on_drop)

    @property
    def lost_session(self) -> str | None:
        """Why the server's session ended, when it ended by itself (its process exited, its
        connection failed, it failed to start); ``None`` while one is up or starting, before
        the first use and after :meth:`aclose`. The next use starts a new session."""
        client = self._client
        return None if client is None or self._closed else client.ended

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called (the server cannot be used again)."""
        return self._closed

    async def aclose(self) -> None:
        """Close the session (idempotent; safe from any task, in any order, after a crash).
        Afterwards every use raises :class:`~plait.mcp.errors.McpServerClosed`."""
        self._closed = True
        client, self._client = self._client, None
        retired, self._retired = self._retired, []
        clients = [*retired, client] if client is not None else retired
        await asyncio.gather(*(c.aclose(CLOSE_TIMEOUT) for c in clients))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _live_client(self) -> McpClient:
        if self._closed:
            raise McpServerClosed(self.name)
        client = self._client
        if client is not None and client.alive:
            return client
        if client is not None:
            self.restarts += 1
            self._retired = [c for c in self._retired if not c.closed] + [client]
        self._tools = None
        self._client = McpClient(
            self.transport,
            server=self.name,
            init_timeout=self.init_timeout,
            on_tools_changed=self._tools_changed,
        )
        return self._client

    def _tools_changed(self) -> None:
        self._tools = None

    def _wrap(self, remote: list[RemoteTool]) -> tuple[list[McpTool], list[McpToolRejected]]:
        """The kept tools as plait tools, and the ones left out: every tool of a name two of
        them end up with (offering one would hide the other), and each oversized schema."""
        by_name: dict[str, list[RemoteTool]] = {}
        for item in remote:
            if (self.allow is not None and item.name not in self.allow) or item.name in self.block:
                continue
            name = _UNSAFE.sub("_", f"{self.prefix}_{item.name}")[:_MAX_NAME]
            by_name.setdefault(name, []).append(item)
        tools: list[McpTool] = []
        rejected: list[McpToolRejected] = []
        for name, items in by_name.items():
            if len(items) > 1:
                names = [i.name for i in items]
                listed = ", ".join(repr(n) for n in names[:5])
                listed += f" and {len(names) - 5} more" if len(names) > 5 else ""
                every = "both" if len(names) == 2 else "all"
                rejected.append(
                    McpToolRejected(
                        self.name,
                        names,
                        f"tools {listed} {every} become {name!r} (prefixed, characters other than "
                        "letters, digits, '_' and '-' replaced, cut at 64); they are left out: "
                        "block all but one of them.",
                    )
                )
                continue
            try:
                tools.append(McpTool(self, items[0], name))
            except McpToolRejected as exc:
                rejected.append(exc)
        return tools, rejected


def _require_sdk(server: str) -> None:
    """Fail at construction, not at the first call, when the ``mcp`` extra is missing."""
    import importlib.util

    try:
        found = importlib.util.find_spec("mcp") is not None
    except ValueError:  # in sys.modules as None: imports of it are blocked
        found = False
    if not found:
        raise McpConfigError(f"MCP server {server!r} needs the MCP SDK: pip install 'plait[mcp]'.")


def _check_prefix(prefix: str, server: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise McpConfigError(
            f"MCP server {server!r}: the tool prefix {prefix!r} must start with a letter and "
            "hold only letters, digits, '_' and '-' (at most 32); every MCP tool is prefixed."
        )
    return prefix


def _transport(
    name: str,
    command: Sequence[str] | None,
    url: str | None,
    env: Mapping[str, str] | None,
    cwd: str | None,
    headers: Mapping[str, str] | None,
    max_message_bytes: int,
) -> StdioTransport | HttpTransport:
    if (command is None) == (url is None):
        raise McpConfigError(
            f"MCP server {name!r} needs exactly one of command=[program, args...] or url=..."
        )
    if command is not None:
        if isinstance(command, str) or not command or not all(isinstance(c, str) for c in command):
            raise McpConfigError(
                f"MCP server {name!r}: command must be a non-empty list of strings "
                "(program then arguments)."
            )
        if headers:
            raise McpConfigError(f"MCP server {name!r}: headers apply to url= servers only.")
        env_copy = dict(env) if env is not None else None
        return StdioTransport(tuple(command), env_copy, cwd, max_message_bytes)
    assert url is not None
    if not url.startswith(("http://", "https://")):
        raise McpConfigError(f"MCP server {name!r}: url must start with http:// or https://.")
    if env is not None or cwd is not None:
        raise McpConfigError(f"MCP server {name!r}: env and cwd apply to command= servers only.")
    return HttpTransport(url, dict(headers or {}), max_message_bytes)


def _names(names: Iterable[str], what: str, server: str) -> list[str]:
    if isinstance(names, str):
        raise McpConfigError(f"MCP server {server!r}: {what} takes a list of tool names.")
    found = list(names)
    if not all(isinstance(n, str) and n for n in found):
        raise McpConfigError(f"MCP server {server!r}: {what} holds non-empty tool names only.")
    return found


def _seconds(value: float, what: str, server: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise McpConfigError(
            f"MCP server {server!r}: {what} must be a number of seconds > 0, got {value!r}."
        )
    if math.isinf(value):
        raise McpConfigError(f"MCP server {server!r}: {what} must be finite (every wait ends).")
    return float(value)
