"""A subagent's ``invoke_agent`` span is a child of the parent's ``execute_tool task`` span
(OpenTelemetry GenAI conventions), both recorded in memory by the real SDK."""

from __future__ import annotations

from otel_memory import Otel

from plait import Agent
from plait.messages import ToolCall
from plait.models.scripted import ScriptedModel
from plait.subagents import Subagent, Subagents


async def test_the_childs_invoke_agent_span_nests_under_the_parents_tool_span(
    otel: Otel,
) -> None:
    child = Agent(ScriptedModel(["child answer"]), middleware=[otel.telemetry(agent_name="kid")])
    call = ToolCall("c1", "task", {"subagent_type": "kid", "description": "Help."})
    parent = Agent(
        ScriptedModel([call, "done"]),
        middleware=[
            otel.telemetry(agent_name="root"),
            Subagents({"kid": Subagent("Helps.", child)}),
        ],
    )
    result = await parent.run("Go.")
    assert result.output == "done"
    root = otel.one("invoke_agent root")
    tool = otel.one("execute_tool task")
    kid = otel.one("invoke_agent kid")
    assert tool.parent is not None and tool.parent.span_id == root.context.span_id
    assert kid.parent is not None and kid.parent.span_id == tool.context.span_id
    assert kid.context.trace_id == root.context.trace_id
