"""An agent run as another agent's tool: ``agent.as_tool(name, description)``.

The parent's model calls the tool with a ``task``; the child runs one turn on its own thread and
the parent's model reads only its final answer.

==========================  ====================================================================
what                        how
==========================  ====================================================================
thread                      ``<parent thread>/<tool call id>`` in the parent's store (the child
                            agent's own store is not used), so it can be opened later and is
                            never mixed into the parent's history
events                      every child event reaches the parent's caller live, wrapped in a
                            ``SubagentEventRelayed`` (name, depth, thread id, the parent's call
                            id, the event); a grandchild's arrive once, with its own tags
usage                       each model call of the subtree (its ``DispatchFinished`` usage) is
                            added to the parent's turn usage, so ``RunResult.usage`` is the
                            tree's, failed children included
depth                       :attr:`TreeLimits.max_depth` (default 3): deeper calls are refused
model calls                 :attr:`TreeLimits.max_model_calls` (default 100): the model calls of
                            every subagent in the tree together; the call past it fails the
                            child's turn (the root's own calls are bounded by its ``Limits``)
deadline                    :attr:`TreeLimits.timeout` seconds from the first delegation, shared
                            by the whole tree; each call is also bounded by the parent's
                            ``Limits.tool_timeout``
failure                     a child that raises, times out or runs out of budget gives the
                            parent's model a tool error (``ToolError``) and the parent goes on
parallel calls              bounded by the parent's ``Limits.max_concurrent_tools``
paused child                pauses the parent's call; the parent's resume resumes the child
                            (:mod:`plait.runtime.delegation_pause`)
==========================  ====================================================================

The tree (limits, model-call count, deadline) travels in a context variable, so a child that
delegates in turn shares it without any wiring. The limits of the outermost delegation apply.

A child whose turn pauses (a call awaiting approval) pauses the parent's call, and the
parent's resume resumes the child (:mod:`plait.runtime.delegation_pause`).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError, LimitExceeded, ToolError
from plait.messages import ToolDefinition, UserMessage
from plait.middleware.context import Event
from plait.runtime import delegation_pause
from plait.runtime.events import DispatchFinished, ModelRequestSent, SubagentEventRelayed
from plait.tools import Tool, ToolContext

if TYPE_CHECKING:
    from plait.runtime.agent import Agent

__all__ = ["AgentTool", "TreeLimits", "current_depth", "run_subagent"]


@dataclass(frozen=True, slots=True)
class TreeLimits:
    """Bounds that hold across a tree of delegating agents (see the module table)."""

    max_depth: int = 3
    max_model_calls: int = 100
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.max_depth < 1 or self.max_model_calls < 1:
            raise ConfigurationError("TreeLimits.max_depth and max_model_calls must be >= 1.")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigurationError("TreeLimits.timeout must be seconds > 0, or None.")


@dataclass(slots=True)
class _Tree:
    limits: TreeLimits
    deadline: float | None
    model_calls: int = 0
    names: list[str] = field(default_factory=list)


_current: ContextVar[tuple[_Tree, int] | None] = ContextVar("plait_subagent_tree", default=None)


def current_depth() -> int:
    """The delegation depth of the code running now: 0 in a root turn, 1 in a child, …"""
    node = _current.get()
    return 0 if node is None else node[1]


def _child_agent(source: Agent[Any] | Callable[[], Agent[Any]]) -> tuple[Agent[Any], bool]:
    """The agent to run and whether it was made for this call (then closed after it)."""
    # An Agent is not callable; a factory is (no import of the agent module: it imports this).
    if not callable(source):
        return copy.copy(source), False
    made = source()
    if callable(made) or not hasattr(made, "store"):
        raise ConfigurationError(
            f"A subagent factory must return an Agent, got {type(made).__name__}."
        )
    return made, True


async def run_subagent(
    source: Agent[Any] | Callable[[], Agent[Any]],
    name: str,
    task: str,
    ctx: ToolContext,
    limits: TreeLimits | None = None,
    *,
    state: Mapping[str, Any] | None = None,
) -> str:
    """Run ``task`` as one turn of the subagent ``source`` for the tool call ``ctx.call`` and
    return its final answer; every failure becomes a :class:`~plait.errors.ToolError`. ``state``
    goes into the child thread's state before its turn starts. A child turn that pauses raises
    :class:`~plait.runtime.pause.PauseTurn` (the parent's call is held); in the parent's resume
    the child's paused turn is resumed instead (:mod:`plait.runtime.delegation_pause`)."""
    from plait.runtime.turn import Turn

    loop = asyncio.get_running_loop()
    node = _current.get()
    if node is None:
        limits = limits or TreeLimits()
        deadline = None if limits.timeout is None else loop.time() + limits.timeout
        tree, depth = _Tree(limits, deadline), 1
    else:
        tree, depth = node[0], node[1] + 1
    if depth > tree.limits.max_depth:
        raise ToolError(
            f"Subagent {name!r} was not started: the delegation depth limit "
            f"({tree.limits.max_depth}) is reached. Do the task yourself."
        )
    store = ctx.turn.store
    if store is None:
        raise ConfigurationError("run_subagent needs a turn with a store (run it from a tool).")
    agent, made = _child_agent(source)
    agent.store, agent._owned, agent._unsettled = store, [], {}
    thread_id = f"{ctx.turn.thread_id}/{ctx.call.id}"
    parent = ctx.turn

    def sink(event: Event) -> None:
        if isinstance(event, SubagentEventRelayed):
            parent.emit(event)  # a grandchild's: tagged already
            inner = event.event
        else:
            parent.emit(
                SubagentEventRelayed(
                    name=name, depth=depth, thread_id=thread_id, event=event, call_id=ctx.call.id
                )
            )
            inner = event
            if isinstance(event, ModelRequestSent):
                tree.model_calls += 1
                if tree.model_calls > tree.limits.max_model_calls:
                    raise LimitExceeded(
                        "subagent_model_calls",
                        tree.limits.max_model_calls,
                        f"The subagents' model-call budget "
                        f"({tree.limits.max_model_calls}) is spent.",
                    )
        if isinstance(inner, DispatchFinished):
            parent.usage = parent.usage + inner.usage

    decisions = delegation_pause.decisions_for(parent, ctx.call.id)
    if decisions is None:
        turn = Turn(
            agent, thread_id, [UserMessage(task)], dict(state or {}), sink, parent.streaming
        )
    else:  # the parent's resume reaches the child's paused turn
        from plait.runtime.resume import ResumedTurn

        turn = ResumedTurn(agent, thread_id, decisions, sink, parent.streaming)
    token = _current.set((tree, depth))
    try:
        async with asyncio.timeout_at(tree.deadline):
            result = await turn.run()
    except TimeoutError:
        raise ToolError(
            f"Subagent {name!r} ran past the subagents' deadline "
            f"({tree.limits.timeout:g} s for the whole tree) and was stopped; its thread "
            f"{thread_id!r} keeps what it did."
        ) from None
    except Exception as exc:
        raise ToolError(
            f"Subagent {name!r} failed: {type(exc).__name__}: {exc} (its thread {thread_id!r} "
            "keeps what it did). Try a smaller task, or do it yourself."
        ) from exc
    finally:
        _current.reset(token)
        if made:
            await agent.aclose()
    if result.pending:
        raise delegation_pause.child_paused(name, depth, thread_id, ctx.call.id, result.pending)
    if isinstance(result.output, str):
        return result.output
    from pydantic_core import to_jsonable_python  # a structured answer reaches the parent as JSON

    return json.dumps(to_jsonable_python(result.output), ensure_ascii=False)


class AgentTool(Tool):
    """A tool that runs ``agent`` (or an agent a factory makes, per call) on the ``task`` the
    model gives (see the module table). Made by :meth:`Agent.as_tool`."""

    def __init__(
        self,
        agent: Agent[Any] | Callable[[], Agent[Any]],
        name: str,
        description: str,
        *,
        limits: TreeLimits | None = None,
        timeout: float | None = None,
    ) -> None:
        super().__init__(
            ToolDefinition(
                name,
                description,
                {
                    "type": "object",
                    "properties": {
                        "task": {
                            "type": "string",
                            "description": "The whole task, with every detail the agent "
                            "needs: it sees nothing else of this conversation.",
                        }
                    },
                    "required": ["task"],
                },
            )
        )
        self.agent = agent
        self.limits = limits
        self.timeout = timeout

    def validate(self, args: Any) -> dict[str, Any]:
        task = args.get("task")
        if not isinstance(task, str) or not task.strip():
            from plait.errors import ToolArgumentsError

            raise ToolArgumentsError(self.name, ["task: a non-empty string is required"])
        return {"task": task}

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return await run_subagent(self.agent, self.name, args["task"], ctx, self.limits)
