"""``McpToolset``: MCP servers' tools in an agent's turns, or behind skills.

Two ways to use the tools of a set of servers:

* **As agent tools**: put the toolset in the agent's middleware. At the start of every turn it
  registers each server's (cached) tools on the turn's registry, so a list the server changed
  shows up on the next turn. A name an agent tool (or other middleware) already has is a
  :class:`~plait.errors.ConfigurationError` that aborts the turn before the model is called
  (``TurnAborted`` with it as ``error``): prefixes exist so nothing is shadowed silently.
* **Behind skills**: leave it out of the middleware and give its resolvers to the skills battery,
  so a skill's ``metadata.include_tools`` can name MCP tools (by prefixed name) and only a skill
  in use puts them in the request::

      SkillsMiddleware(sources, tools=toolset.resolve)             # disclosure mode
      create_skill_manager(sources, skill_tools=toolset.skill_tools)  # managed mode

Two servers with the same prefix, or two tools with one prefixed name, raise
:class:`~plait.mcp.errors.McpConfigError`. The toolset closes its servers in :meth:`aclose`
(``async with``); an agent does not close middleware it was given.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, Self

from plait.errors import ConfigurationError
from plait.mcp.errors import McpConfigError
from plait.mcp.server import McpServer, McpTool
from plait.middleware.base import Middleware, Next
from plait.middleware.context import DispatchContext, TurnContext

__all__ = ["McpToolset"]


class _MetaWithMetadata(Protocol):
    @property
    def metadata(self) -> Mapping[str, Any]: ...


class _Entry(Protocol):
    """What :meth:`McpToolset.skill_tools` reads from a skill's catalog entry."""

    @property
    def meta(self) -> _MetaWithMetadata: ...


class McpToolset(Middleware):
    """The tools of ``servers`` (see the module docstring); prefixes must differ."""

    def __init__(self, servers: Iterable[McpServer]) -> None:
        self.servers: list[McpServer] = list(servers)
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
        once. Raises :class:`McpConfigError` on a name two tools would share, and the first
        server's connect error (:class:`~plait.mcp.errors.McpConnectError`)."""
        lists = await asyncio.gather(*(s.list_tools() for s in self.servers))
        seen: dict[str, McpServer] = {}
        tools: list[McpTool] = []
        for server, found in zip(self.servers, lists, strict=True):
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

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        """Register the servers' tools on this turn's registry (see the module docstring)."""
        registry = ctx.registry
        for item in await self.list_tools():
            existing = registry.get(item.name)
            if existing is not None and not isinstance(existing, McpTool):
                raise ConfigurationError(
                    f"The MCP tool {item.name!r} (server {item.server.name!r}) has the name of "
                    "an agent tool; give the server another prefix= or block the tool."
                )
            registry.register(item, replace=True)
        await next()

    async def resolve(self, name: str, ctx: DispatchContext) -> McpTool | None:
        """The MCP tool with the prefixed ``name``, or ``None``: a
        :data:`~plait.skills.disclosure.skill_tools.ToolNameResolver` for
        ``SkillsMiddleware(tools=...)``. Only servers whose prefix matches are contacted."""
        for server in self._servers_for(name):
            for item in await server.list_tools():
                if item.name == name:
                    return item
        return None

    async def skill_tools(self, entry: _Entry) -> list[McpTool]:
        """The MCP tools a skill's ``metadata.include_tools`` names (space- or comma-separated;
        other names are skipped): a skill-tools provider for ``create_skill_manager``."""
        raw = entry.meta.metadata.get("include_tools", "")
        names = [n for n in re.split(r"[\s,]+", raw if isinstance(raw, str) else "") if n]
        found: list[McpTool] = []
        for name in names:
            for server in self._servers_for(name):
                found += [t for t in await server.list_tools() if t.name == name]
        return found

    async def aclose(self) -> None:
        """Close every server, all at once (each in its own task: order does not matter)."""
        await asyncio.gather(*(s.aclose() for s in self.servers), return_exceptions=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _servers_for(self, name: str) -> Sequence[McpServer]:
        return [s for s in self.servers if name.startswith(f"{s.prefix}_")]
