"""``McpToolset``: MCP servers' tools in an agent's turns, or behind skills.

Two ways to use the tools of a set of servers:

* **As agent tools**: put the toolset in the agent's middleware. At the start of every turn it
  registers each server's (cached) tools on the turn's registry, so a list the server changed
  shows up on the next turn. A tool that cannot be offered is left out, and only it, reported by
  an :class:`~plait.mcp.events.McpToolsSkipped` event on every turn: two tools of a server with
  one name, an input schema over ``max_schema_chars`` (see :meth:`McpServer.list_tools`), a
  name an agent tool or another middleware's tool has (that tool is kept: nothing is shadowed),
  a name two servers' tools share (both are left out).
* **Behind skills**: leave it out of the middleware and give its resolvers to the skills battery,
  so a skill's ``metadata.include_tools`` can name MCP tools (by prefixed name) and only a skill
  in use puts them in the request::

      SkillsMiddleware(sources, tools=toolset.resolve)             # disclosure mode
      create_skill_manager(sources, skill_tools=toolset.skill_tools)  # managed mode

**A server that cannot be reached** (it does not start, ``initialize`` or ``tools/list`` does not
answer within ``init_timeout``, ``tools/list`` fails, is malformed or lists more than ``max_tools``,
its session ends) does not fail the turn: its tools are left out, an
:class:`~plait.mcp.events.McpServerSkipped` event names it and the cause, and it is tried again on
the first turn :data:`RETRY_FIRST_SECONDS` later, the wait doubling after each failure in a row up
to :data:`RETRY_MAX_SECONDS`; a success resets it. Until then every turn skips it without waiting
and reports it again. A retry runs in the background (one task per server, bounded by the server's
``init_timeout``): the turn that starts it, and every turn until it connects, goes on without the
server (reported with "reconnecting in the background"); the first turn after it connected has its
tools. :meth:`McpToolset.wait_for_retries` waits for the retries in flight. A server whose session
ended since its last use (its process exited, its connection failed) is noticed at once, without a
request: the turn starts it again in the background and waits up to ``reconnect_seconds``
(:data:`RECONNECT_SECONDS`) for it (turns that start meanwhile wait for the same restart, as long);
a server back by then keeps its tools, one that is not is skipped ("its session ended: ...",
reconnecting in the background), never holding the turn for its ``init_timeout``. (An HTTP session
that ended without closing its stream is noticed by the first call that needs it, which fails and
restarts it.) The same applies to :meth:`McpToolset.resolve` and :meth:`McpToolset.skill_tools` (a
skipped server resolves no tool).

**Deferred servers** (``McpServer(defer=True)``) register their tools without advertising them:
the model finds them with ``search_tools`` (:class:`~plait.runtime.tool_search.ToolSearch`, which
an :class:`~plait.runtime.Agent` adds by itself when a middleware has ``defers_tools``), so a
server with many tools costs no request tokens until they are needed.

Two servers with the same prefix raise :class:`~plait.mcp.errors.McpConfigError` when the
toolset is built. The toolset closes its servers in :meth:`aclose`
(``async with``); an agent does not close middleware it was given.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

from plait.mcp.errors import McpConfigError, McpError, McpServerClosed, McpToolRejected
from plait.mcp.events import McpServerSkipped, McpToolsSkipped
from plait.mcp.server import McpServer, McpTool
from plait.middleware.base import Middleware, Next
from plait.middleware.context import DispatchContext, EventSink, TurnContext
from plait.tools import ToolRegistry

__all__ = ["RECONNECT_SECONDS", "RETRY_FIRST_SECONDS", "RETRY_MAX_SECONDS", "McpToolset"]

RECONNECT_SECONDS = 2.0
"""Seconds a turn waits for a server whose session ended since its last use (its process
exited, its connection failed) to start again; past it the turn goes on without the server's
tools while the restart goes on in the background."""

RETRY_FIRST_SECONDS = 5.0
"""Seconds a server that could not be reached is skipped before the first retry."""

RETRY_MAX_SECONDS = 300.0
"""The longest wait between retries (the wait doubles after each failure in a row)."""


@dataclass(slots=True)
class _Down:
    """A server that could not be reached: why, how often in a row, when to try again; and
    until when turns wait for the restart of a session that ended (``0``: they do not)."""

    reason: str
    failures: int
    retry_at: float
    restart_until: float = 0.0


def _discard(_: object) -> None:
    return None


class _MetaWithMetadata(Protocol):
    @property
    def metadata(self) -> Mapping[str, Any]: ...


class _Entry(Protocol):
    """What :meth:`McpToolset.skill_tools` reads from a skill's catalog entry."""

    @property
    def meta(self) -> _MetaWithMetadata: ...


class McpToolset(Middleware):
    """The tools of ``servers`` (see the module docstring); prefixes must differ.
    ``retry_seconds`` / ``max_retry_seconds`` set the first and the longest wait before an
    unreachable server is tried again; ``reconnect_seconds`` how long a turn waits for a server
    whose session ended since its last use to start again (:data:`RECONNECT_SECONDS`)."""

    def __init__(
        self,
        servers: Iterable[McpServer],
        *,
        retry_seconds: float = RETRY_FIRST_SECONDS,
        max_retry_seconds: float = RETRY_MAX_SECONDS,
        reconnect_seconds: float = RECONNECT_SECONDS,
    ) -> None:
        self.servers: list[McpServer] = list(servers)
        if (
            isinstance(reconnect_seconds, bool)
            or not isinstance(reconnect_seconds, int | float)
            or not 0 < reconnect_seconds < math.inf
        ):
            raise McpConfigError(
                "McpToolset: reconnect_seconds must be a number of seconds > 0 (finite), not "
                f"{reconnect_seconds!r}; the default is {RECONNECT_SECONDS:g}."
            )
        self.reconnect_seconds = float(reconnect_seconds)
        numbers = all(
            isinstance(v, int | float) and not isinstance(v, bool)
            for v in (retry_seconds, max_retry_seconds)
        )
        if not numbers or not 0 < retry_seconds <= max_retry_seconds < math.inf:
            raise McpConfigError(
                "McpToolset needs 0 < retry_seconds <= max_retry_seconds (finite); got "
                f"{retry_seconds!r} and {max_retry_seconds!r}."
            )
        self.retry_seconds = float(retry_seconds)
        self.max_retry_seconds = float(max_retry_seconds)
        self._down: dict[str, _Down] = {}
        self._retries: dict[str, asyncio.Task[None]] = {}
        self._closed = False
        prefixes: dict[str, str] = {}
        for server in self.servers:
            if not isinstance(server, McpServer):
                raise McpConfigError(f"McpToolset takes McpServer objects; got {server!r}.")
            other = prefixes.get(server.prefix)
            if other is not None:
                raise McpConfigError(
                    f"MCP servers {other!r} and {server.name!r} share the tool prefix "
                    f"{server.prefix!r}; give one of them another prefix=."
                )
            prefixes[server.prefix] = server.name

    async def list_tools(self) -> list[McpTool]:
        """Every server's tools (cached per server), connecting servers as needed, all at
        once. Raises :class:`McpConfigError` on a name two servers' tools would share (the
        tools a server rejects itself are left out: see :attr:`McpServer.rejected_tools`), and
        the first server's error (:class:`~plait.mcp.errors.McpConnectError`,
        :class:`~plait.mcp.errors.McpToolListError`, ...); a turn skips instead."""
        lists = await asyncio.gather(*(s.list_tools() for s in self.servers))
        return _check_unique(self.servers, lists)

    @property
    def defers_tools(self) -> bool:
        """Whether a server's tools are deferred (an agent then adds ``search_tools``)."""
        return any(server.defer for server in self.servers)

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        """Register the reachable servers' tools on this turn's registry; report each skipped
        server (:class:`McpServerSkipped`) and each tool left out (:class:`McpToolsSkipped`):
        one its server rejected, one whose name an agent or middleware tool has (that tool is
        kept), one whose name another server's tool has (both are left out)."""
        registry = ctx.registry
        found = await asyncio.gather(*(self._reachable(s, ctx.emit) for s in self.servers))
        lists = [tools for tools, _ in filter(None, found)]
        rejected = [problem for _, left_out in filter(None, found) for problem in left_out]
        for item in _kept(lists, registry, rejected):
            registry.register(item, replace=True)
        for problem in rejected:
            reason = str(problem)
            ctx.emit(McpToolsSkipped(server=problem.server, tools=problem.tools, reason=reason))
        await next()

    async def resolve(self, name: str, ctx: DispatchContext) -> McpTool | None:
        """The MCP tool with the prefixed ``name``, or ``None``: a
        :data:`~plait.skills.disclosure.skill_tools.ToolNameResolver` for
        ``SkillsMiddleware(tools=...)``. Only servers whose prefix matches are contacted; one
        that cannot be reached resolves nothing (and is reported)."""
        for server in self._servers_for(name):
            for item in await self._tools_of(server, ctx.turn.emit):
                if item.name == name:
                    return item
        return None

    async def skill_tools(self, entry: _Entry) -> list[McpTool]:
        """The MCP tools a skill's ``metadata.include_tools`` names (space- or comma-separated;
        other names are skipped, and so are the tools of a server that cannot be reached): a
        skill-tools provider for ``create_skill_manager``."""
        raw = entry.meta.metadata.get("include_tools", "")
        names = [n for n in re.split(r"[\s,]+", raw if isinstance(raw, str) else "") if n]
        found: list[McpTool] = []
        for name in names:
            for server in self._servers_for(name):
                found += [t for t in await self._tools_of(server) if t.name == name]
        return found

    async def _tools_of(self, server: McpServer, emit: EventSink = _discard) -> list[McpTool]:
        """``server``'s tools, or ``[]`` while it is skipped (see :meth:`_reachable`)."""
        found = await self._reachable(server, emit)
        return [] if found is None else found[0]

    async def _reachable(
        self, server: McpServer, emit: EventSink
    ) -> tuple[list[McpTool], list[McpToolRejected]] | None:
        """``server``'s tools and the ones it left out (read together, so a list changed
        meanwhile cannot mix them), or ``None`` (reported through ``emit``) while it is unreachable
        or its tool list unusable (malformed, too long), waiting for its next retry or
        reconnecting in the background. Only a server never reached before is waited for here
        (up to its ``init_timeout``); one whose session ended since, up to
        ``reconnect_seconds``. A closed server raises :class:`McpServerClosed`."""
        down = self._down.get(server.name)
        now = time.monotonic()
        if down is None and (lost := server.lost_session) is not None:
            reason = f"MCP server {server.name!r}: its session ended: {lost}"
            down = _Down(reason, 1, now, now + self.reconnect_seconds)
            self._down[server.name] = down
        if down is not None and down.restart_until > now:
            down = await self._await_restart(server, down, now)
        if self._closed or server.closed:  # closed meanwhile: no new session, no retry
            raise McpServerClosed(server.name)
        if down is None:
            try:
                tools = await server.list_tools()
                return tools, server.rejected_tools
            except McpServerClosed:
                raise
            except Exception as exc:  # cannot start; tools/list failed, timed out, unusable
                down = self._failed(server, exc, down, now)
        reason = down.reason
        if down.retry_at <= now:
            self._retry_in_background(server)
            reason += " (reconnecting in the background)"
        emit(
            McpServerSkipped(
                server=server.name,
                reason=reason,
                failures=down.failures,
                retry_in=round(max(0.0, down.retry_at - now), 3),
            )
        )
        return None

    async def _await_restart(self, server: McpServer, down: _Down, now: float) -> _Down | None:
        """``server``'s session ended since its last use: start it again in the background
        (:meth:`_retry`; turns arriving meanwhile share it) and wait for that until
        ``down.restart_until``: ``reconnect_seconds`` after the end was seen, for every turn.
        ``None`` once it is back; else its failure, or that it is still reconnecting."""
        task = self._retry_in_background(server)
        await asyncio.wait({task}, timeout=down.restart_until - now)
        found = self._down.get(server.name)
        if found is None and (again := server.lost_session) is not None:
            # back, then gone again at once: starting it here would wait its init_timeout
            gone = McpError(f"MCP server {server.name!r}: its new session ended too: {again}")
            found = self._failed(server, gone, None, now)
        return found

    def _retry_in_background(self, server: McpServer) -> asyncio.Task[None]:
        """``server``'s retry in flight on this event loop, started if there is none."""
        task = self._retries.get(server.name)
        loop = asyncio.get_running_loop()
        if task is not None and not task.done() and task.get_loop() is loop:
            return task
        task = loop.create_task(self._retry(server), name=f"mcp-retry:{server.name}")
        self._retries[server.name] = task
        return task

    async def _retry(self, server: McpServer) -> None:
        """One background retry: success clears the server's failure; a failure (an unusable
        tool list too) pushes its next retry further."""
        try:
            await server.list_tools()
        except McpServerClosed:
            return
        except Exception as exc:  # an McpError, or anything else the SDK let through
            self._failed(server, exc, self._down.get(server.name), time.monotonic())
        else:
            self._down.pop(server.name, None)

    async def wait_for_retries(self) -> None:
        """Wait until every background retry in flight has finished (each is bounded by its
        server's ``init_timeout``, for the start and for ``tools/list``)."""
        pending = [t for t in self._retries.values() if not t.done()]
        if pending:
            await asyncio.wait(pending)

    def _failed(self, server: McpServer, exc: Exception, down: _Down | None, now: float) -> _Down:
        failures = 1 if down is None else down.failures + 1
        wait = min(self.max_retry_seconds, self.retry_seconds * 2 ** min(failures - 1, 30))
        reason = str(exc) if isinstance(exc, McpError) else f"{type(exc).__name__}: {exc}"
        self._down[server.name] = _Down(reason, failures, now + wait)
        return self._down[server.name]

    async def aclose(self) -> None:
        """Cancel the background retries, then close every server, all at once (each in its
        own task: order does not matter). A turn still using the toolset then gets
        :class:`McpServerClosed` (one waiting for a restart too), and no retry starts again."""
        self._closed = True
        retries, self._retries = list(self._retries.values()), {}
        loop = asyncio.get_running_loop()
        mine = [t for t in retries if not t.done() and t.get_loop() is loop]
        for task in mine:
            task.cancel()
        if mine:
            await asyncio.wait(mine)
        await asyncio.gather(*(s.aclose() for s in self.servers), return_exceptions=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _servers_for(self, name: str) -> Sequence[McpServer]:
        return [s for s in self.servers if name.startswith(f"{s.prefix}_")]


def _kept(
    lists: Sequence[list[McpTool]],
    registry: ToolRegistry,
    rejected: list[McpToolRejected],
) -> list[McpTool]:
    """The tools of ``lists`` (one per server, in order) a turn can register; each left out
    is added to ``rejected``: a name two servers' tools share (both: offering one would hide
    the other), or a name the turn's registry has for a tool that is no MCP tool (the agent's
    or a middleware's, which is kept)."""
    owners: dict[str, list[McpTool]] = {}
    for found in lists:
        for item in found:
            owners.setdefault(item.name, []).append(item)
    kept: list[McpTool] = []
    for name, items in owners.items():
        existing = registry.get(name)
        if len(items) > 1:
            names = " and ".join(repr(i.server.name) for i in items)
            for item in items:
                reason = (
                    f"its tool {item.remote.name!r} becomes {name!r}, a name MCP servers "
                    f"{names} share; it is left out of each: change a prefix or block the tool "
                    "in all but one."
                )
                rejected.append(McpToolRejected(item.server.name, [item.remote.name], reason))
        elif existing is not None and not isinstance(existing, McpTool):
            (item,) = items
            reason = (
                f"its tool {item.remote.name!r} becomes {name!r}, the name of an agent or "
                "middleware tool (which is kept); give the server another prefix= or block "
                "the tool."
            )
            rejected.append(McpToolRejected(item.server.name, [item.remote.name], reason))
        else:
            kept += items
    return kept


def _check_unique(servers: Sequence[McpServer], lists: Sequence[list[McpTool]]) -> list[McpTool]:
    """Every tool of ``lists`` (one per server, in order); :class:`McpConfigError` when two
    servers' tools share a name."""
    seen: dict[str, McpServer] = {}
    tools: list[McpTool] = []
    for server, found in zip(servers, lists, strict=True):
        for item in found:
            owner = seen.get(item.name)
            if owner is not None:
                raise McpConfigError(
                    f"MCP servers {owner.name!r} and {server.name!r} both have a tool "
                    f"named {item.name!r}; change a prefix or block the tool in one."
                )
            seen[item.name] = server
            tools.append(item)
    return tools
