"""Paused turns over HTTP: tools the client runs, and decisions the client sends back.

**Client tools.** A frontend's tools (AG-UI ``RunAgentInput.tools``) are checked
(:func:`client_tools`) and kept in the thread state under :data:`CLIENT_TOOLS_KEY` (the next
request that names tools replaces them; one without tools keeps them). :class:`ClientTools`,
a middleware :func:`install` adds to each served agent, registers them in every turn's registry
(and a resumed turn's, so the call resolves again) and holds each call of one with
:class:`~plait.runtime.pause.PauseTurn` (reason :data:`CLIENT_REASON`): the turn pauses, the
call is the client's to run, and the client's ``role: "tool"`` message for it becomes an
:class:`~plait.runtime.pause.Answer` through ``agent.resume``. The server never runs them.

**Decisions** (:func:`decision`) come as ``{"type": "approve", "args"?}``, ``{"type":
"reject", "message"?}`` or ``{"type": "answer", "result"}``.

Bounds of a client tool list: at most :data:`MAX_CLIENT_TOOLS` tools; a name of 1-64 letters,
digits, ``_`` or ``-``, not one of the agent's own tools; a description of at most
:data:`MAX_DESCRIPTION` characters; parameters an ``object`` JSON schema of at most
:data:`MAX_SCHEMA_BYTES` bytes and :data:`MAX_SCHEMA_DEPTH` levels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from plait.messages import ToolCall, ToolDefinition
from plait.middleware.base import Middleware
from plait.runtime.pause import PENDING_KEY, Answer, Approve, Decision, PauseTurn, Reject
from plait.serve.errors import ServeError
from plait.tools import Tool, ToolContext

if TYPE_CHECKING:
    from plait.middleware.base import Next
    from plait.middleware.context import DispatchContext, TurnContext
    from plait.runtime.agent import Agent
    from plait.runtime.pause import PendingCall

__all__ = [
    "CLIENT_REASON",
    "CLIENT_TOOLS_KEY",
    "ClientTool",
    "ClientTools",
    "client_tools",
    "decision",
    "install",
    "pending_of",
]

CLIENT_TOOLS_KEY = "plait.serve.client_tools"
"""The thread-state key holding the client's tool definitions (reserved)."""

CLIENT_REASON = "client tool: the frontend runs it and sends its result"
"""The ``reason`` of a pending call that is a client tool's (not an approval)."""

MAX_CLIENT_TOOLS = 64
MAX_DESCRIPTION = 4096
MAX_SCHEMA_BYTES = 16 * 1024
MAX_SCHEMA_DEPTH = 32
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ClientTool(Tool):
    """A tool the client runs: advertised to the model, every call held (never run here)."""

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        # Reached only if someone approves a client call instead of answering it.
        return {"error": f"{self.name} runs on the client; answer the call with its result."}


class ClientTools(Middleware):
    """Registers the thread's client tools each turn and holds their calls (module docstring)."""

    name = "serve_client_tools"

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        for spec in ctx.state.get(CLIENT_TOOLS_KEY) or ():
            if spec["name"] not in ctx.registry:
                ctx.registry.register(ClientTool(_definition(spec)))
        await next()

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        if isinstance(ctx.registry.get(call.name), ClientTool):
            raise PauseTurn(CLIENT_REASON)
        return call


def _definition(spec: Mapping[str, Any]) -> ToolDefinition:
    return ToolDefinition(spec["name"], spec["description"], spec["parameters"], {"client": True})


def install(agent: Agent) -> None:
    """Add :class:`ClientTools` to ``agent``'s middleware (once; it is last in the chain)."""
    from plait.middleware.ordering import resolve_order
    from plait.middleware.stack import MiddlewareStack

    if not any(isinstance(m, ClientTools) for m in agent.middleware):
        agent.middleware = MiddlewareStack(resolve_order([*agent.middleware, ClientTools()]))


def _depth(value: Any, level: int = 0) -> int:
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _refuse(message: str) -> ServeError:
    return ServeError(400, "invalid_client_tools", message)


def client_tools(tools: Iterable[Any], agent: Agent) -> list[dict[str, Any]]:
    """The client's tools (objects with ``name``, ``description``, ``parameters``) as plain
    definitions, checked against the bounds of the module docstring; 400
    ``invalid_client_tools`` saying what to change otherwise."""
    listed = list(tools)
    if len(listed) > MAX_CLIENT_TOOLS:
        raise _refuse(f"{len(listed)} client tools; send at most {MAX_CLIENT_TOOLS}.")
    own = {t.name for t in agent.tools} | {t.name for m in agent.middleware for t in m.tools()}
    out: list[dict[str, Any]] = []
    for t in listed:
        name, description = getattr(t, "name", None), getattr(t, "description", None) or ""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise _refuse(f"Client tool name {name!r}: use 1-64 letters, digits, '_' or '-'.")
        if name in own or any(d["name"] == name for d in out):
            raise _refuse(
                f"Client tool {name!r} clashes with "
                + ("one of the agent's own tools" if name in own else "another client tool")
                + "; rename it on the client."
            )
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
            raise _refuse(
                f"Client tool {name!r}: the description is a string of at most "
                f"{MAX_DESCRIPTION} characters."
            )
        schema = getattr(t, "parameters", None) or {"type": "object", "properties": {}}
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise _refuse(
                f"Client tool {name!r}: parameters must be a JSON schema of type 'object'."
            )
        if len(json.dumps(schema)) > MAX_SCHEMA_BYTES or _depth(schema) > MAX_SCHEMA_DEPTH:
            raise _refuse(
                f"Client tool {name!r}: its parameters schema is over {MAX_SCHEMA_BYTES} bytes "
                f"or {MAX_SCHEMA_DEPTH} levels deep; simplify it."
            )
        out.append({"name": name, "description": description, "parameters": schema})
    return out


def pending_of(state: Mapping[str, Any]) -> list[PendingCall]:
    """The calls a thread's paused turn waits on (empty when it is not paused)."""
    from plait.runtime.pause import paused_dispatch

    if not state.get(PENDING_KEY):
        return []
    paused = paused_dispatch(state)
    return list(paused.pending) if paused is not None else []


def decision(call_id: str, raw: Any) -> Decision:
    """One decision of the threads API (module docstring); 400 ``invalid_decision`` else."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    assert kind is None or isinstance(raw, dict)
    if kind == "approve" and isinstance(raw.get("args", {}), dict):
        return Approve(args=raw.get("args"), by="client")
    if kind == "reject" and isinstance(raw.get("message", ""), str):
        message = raw.get("message")
        return Reject(message, by="client") if message else Reject(by="client")
    if kind == "answer" and "result" in raw:
        return Answer(raw["result"], by="client")
    raise ServeError(
        400,
        "invalid_decision",
        f"Decision for {call_id!r}: send {{'type': 'approve', 'args'?: {{...}}}}, "
        "{'type': 'reject', 'message'?: str} or {'type': 'answer', 'result': value}.",
    )


def waiting_message(pending: Iterable[PendingCall]) -> str:
    """What a paused thread waits for, in words a client can act on."""
    parts = [
        f"{p.id} ({p.name}: {'result from the client' if p.reason == CLIENT_REASON else p.reason})"
        for p in pending
    ]
    return "; ".join(parts)
