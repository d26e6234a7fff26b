"""``Subagents``: a ``task`` tool over named subagents, the deepagents way.

::

    researcher = Agent(model, system_prompt="Research; answer with sources.", tools=[search])
    agent = Agent(model, middleware=[Subagents({"researcher": Subagent(
        "Researches a question on the web and answers with sources.", researcher)})])

The model calls ``task(subagent_type="researcher", description="...")``; the subagent runs one
turn on the thread ``<thread>/<call id>`` and the model reads only its answer. Everything else
(thread, events, usage, limits across the tree, errors) is :mod:`plait.runtime.delegation`'s.

Unlike deepagents, nothing of the parent's state is forwarded to a child and nothing of the
child's flows back but its answer (deepagents' known leak of subagent state into the parent is
impossible here: the child writes only its own thread); ``inherit_state`` names the state keys
a child starts with (none by default).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plait.errors import ConfigurationError, ToolArgumentsError
from plait.messages import ToolDefinition
from plait.middleware.base import Middleware
from plait.runtime.agent import Agent
from plait.runtime.delegation import TreeLimits, run_subagent
from plait.tools import Tool, ToolContext

__all__ = ["Subagent", "Subagents", "TaskTool"]

TASK_DESCRIPTION = """Hand a self-contained task to a subagent with its own instructions and \
tools and a fresh context; you get back only its final answer. Give it every detail it needs: it \
sees nothing of this conversation. Independent tasks can run in parallel (several calls in one \
answer).

Subagents:
{agents}"""


@dataclass(frozen=True, slots=True)
class Subagent:
    """A named subagent's ``description`` (what the model reads to choose it) and its ``agent``:
    an :class:`~plait.Agent`, or a function returning a new one per call (closed after it)."""

    description: str
    agent: Agent[Any] | Callable[[], Agent[Any]]


class TaskTool(Tool):
    """The ``task`` tool of :class:`Subagents`."""

    def __init__(self, owner: Subagents, name: str) -> None:
        agents = "\n".join(f"- {n}: {s.description}" for n, s in owner.agents.items())
        super().__init__(
            ToolDefinition(
                name,
                TASK_DESCRIPTION.format(agents=agents),
                {
                    "type": "object",
                    "properties": {
                        "subagent_type": {"type": "string", "enum": list(owner.agents)},
                        "description": {
                            "type": "string",
                            "description": "The task, with every detail the subagent needs.",
                        },
                    },
                    "required": ["subagent_type", "description"],
                },
            )
        )
        self.owner = owner
        self.timeout = owner.timeout

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name, task = args.get("subagent_type"), args.get("description")
        problems = []
        if name not in self.owner.agents:
            known = ", ".join(self.owner.agents)
            problems.append(f"subagent_type: {name!r} is not a subagent; use one of: {known}")
        if not isinstance(task, str) or not task.strip():
            problems.append("description: a non-empty string (the task) is required")
        if problems:
            raise ToolArgumentsError(self.name, problems)
        return {"subagent_type": name, "description": task}

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        name = args["subagent_type"]
        spec = self.owner.agents[name]
        state = {k: ctx.state[k] for k in self.owner.inherit_state if k in ctx.state}
        return await run_subagent(
            spec.agent, name, args["description"], ctx, self.owner.limits, state=state
        )


class Subagents(Middleware):
    """Offers the ``task`` tool (``tool_name``) over ``agents`` (name → :class:`Subagent`).

    ``limits`` (:class:`~plait.runtime.delegation.TreeLimits`: depth, total model calls, deadline)
    hold across the whole tree when this is the outermost delegation; ``timeout`` bounds each
    call (default: the agent's ``Limits.tool_timeout``); ``inherit_state`` lists the parent's
    thread-state keys a child starts with.
    """

    def __init__(
        self,
        agents: Mapping[str, Subagent],
        *,
        limits: TreeLimits | None = None,
        timeout: float | None = None,
        tool_name: str = "task",
        inherit_state: Sequence[str] = (),
    ) -> None:
        if not agents:
            raise ConfigurationError("Subagents needs at least one subagent: {name: Subagent}.")
        self.agents = dict(agents)
        self.limits = limits or TreeLimits()
        self.timeout = timeout
        self.inherit_state = tuple(inherit_state)
        self._tool = TaskTool(self, tool_name)

    def tools(self) -> list[Tool]:
        return [self._tool]
