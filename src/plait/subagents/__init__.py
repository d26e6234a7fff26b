"""Subagents: a ``task`` tool over named agents (:class:`Subagents`), built on
``agent.as_tool`` (:mod:`plait.runtime.delegation`). See the package README."""

from __future__ import annotations

from plait.runtime.delegation import AgentTool, TreeLimits
from plait.runtime.events import SubagentEventRelayed
from plait.runtime.pause import SubagentPending
from plait.subagents.middleware import Subagent, Subagents, TaskTool

__all__ = [
    "AgentTool",
    "Subagent",
    "SubagentEventRelayed",
    "SubagentPending",
    "Subagents",
    "TaskTool",
    "TreeLimits",
]
