"""Typed events of the MCP battery, emitted through ``TurnContext.emit``.

They reach a streaming caller live and a ``run`` caller in ``RunResult.events``; ``plait run``
and ``plait chat`` print the ``Skipped`` ones as a warning line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plait.middleware.context import Event

__all__ = ["McpContentDropped", "McpServerSkipped", "McpToolsSkipped"]


@dataclass(slots=True, kw_only=True)
class McpServerSkipped(Event):
    """A server's tools are left out of this turn because it could not be reached or its tool
    list cannot be used.

    ``server`` names it; ``reason`` is the last failure (a connect error, a ``tools/list`` that
    did not answer in time, failed, was malformed or listed more than ``max_tools`` tools, a
    session that ended). ``failures`` counts the failures in a row;
    ``retry_in`` is how many seconds until the next attempt (the first turn that starts after
    that tries again; see :data:`~plait.mcp.toolset.RETRY_FIRST_SECONDS`). The turn goes on
    with the other servers' tools.
    """

    server: str
    reason: str
    failures: int
    retry_in: float
    type: str = "mcp_server_skipped"


@dataclass(slots=True, kw_only=True)
class McpToolsSkipped(Event):
    """Some of a server's tools are left out of this turn; its other tools are offered.

    ``server`` names it, ``tools`` the tools left out (the server's own names, as
    ``block=[...]`` takes them) and ``reason`` the cause, with what to do: two tools that end up
    with one name, an input schema over ``max_schema_chars``, a name an agent tool, a
    middleware's tool or another server's tool already has (see
    :class:`~plait.mcp.errors.McpToolRejected`). Reported on every turn until it is fixed.
    """

    server: str
    tools: list[str] = field(default_factory=list)
    reason: str
    type: str = "mcp_tools_skipped"


@dataclass(slots=True, kw_only=True)
class McpContentDropped(Event):
    """Blocks of an MCP tool result that could not become image or file parts were left out;
    the rest of the result reached the model.

    ``server`` and ``tool`` (the plait name) name the call, ``call_id`` its tool call; ``notes``
    are the lines the model reads instead of each block, each naming it (kind, URI, MIME type,
    size) and why: base64 that does not decode, bytes that are not their MIME type, an image
    type no provider takes, a part over :data:`~plait.parts.MAX_PART_BYTES`, or more blocks
    than :data:`~plait.mcp.results.MAX_RESULT_PARTS`. Fix the server, or expect the model to
    work from the text.
    """

    server: str
    tool: str
    call_id: str
    notes: list[str] = field(default_factory=list)
    type: str = "mcp_content_dropped"
