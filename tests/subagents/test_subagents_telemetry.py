"""A subagent's ``invoke_agent`` span is a child of the parent's ``execute_tool task`` span
(OpenTelemetry GenAI conventions), both recorded in memory by the real SDK."""

from __future__ import annotations

from opentelemetry.trace import StatusCode
from otel_memory import Otel

from plait import Agent
from plait.messages import ToolCall
from plait.models.scripted import ScriptedModel
from plait.runtime import Approve
from plait.subagents import Subagent, SubagentEventRelayed, Subagents
from plait.tools import tool


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


async def test_a_streamed_childs_events_are_not_repeated_on_the_parents_spans(
    otel: Otel,
) -> None:
    child = Agent(ScriptedModel(["a long child answer"]))  # no telemetry of its own
    call = ToolCall("c1", "task", {"subagent_type": "kid", "description": "Help."})
    parent = Agent(
        ScriptedModel([call, "done"]),
        middleware=[
            otel.telemetry(agent_name="root"),
            Subagents({"kid": Subagent("Helps.", child)}),
        ],
    )
    events = [e async for e in parent.stream("Go.", thread_id="p")]
    assert any(isinstance(e, SubagentEventRelayed) for e in events)
    names = [event.name for span in otel.spans() for event in span.events]
    assert not any("subagent" in name for name in names), names


async def test_a_paused_childs_tool_span_is_not_an_error_and_the_resume_nests_again(
    otel: Otel,
) -> None:
    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    child = Agent(
        ScriptedModel([ToolCall("d1", "delete", {"path": "x"}), "gone"]),
        tools=[delete],
        middleware=[otel.telemetry(agent_name="kid")],
    )
    call = ToolCall("c1", "task", {"subagent_type": "kid", "description": "Delete x."})
    parent = Agent(
        ScriptedModel([call, "done"]),
        middleware=[
            otel.telemetry(agent_name="root"),
            Subagents({"kid": Subagent("Deletes.", child)}),
        ],
    )
    paused = await parent.run("Go.", thread_id="p")
    assert paused.paused
    held = otel.one("execute_tool task")
    assert held.attributes is not None and held.attributes["plait.tool.paused"] is True
    assert held.status.status_code is StatusCode.UNSET
    first_kid = otel.one("invoke_agent kid")
    assert first_kid.parent is not None and first_kid.parent.span_id == held.context.span_id
    assert first_kid.attributes is not None
    assert first_kid.attributes["gen_ai.conversation.id"] == "p/c1"
    otel.exporter.clear()

    done = await parent.resume("p", {"c1/d1": Approve()})
    assert done.output == "done"
    tool_span = otel.one("execute_tool task")
    kid = otel.one("invoke_agent kid")
    root = otel.one("invoke_agent root")
    assert kid.parent is not None and kid.parent.span_id == tool_span.context.span_id
    assert tool_span.parent is not None and tool_span.parent.span_id == root.context.span_id
    deleted = otel.one("execute_tool delete")
    assert deleted.parent is not None and deleted.parent.span_id == kid.context.span_id
