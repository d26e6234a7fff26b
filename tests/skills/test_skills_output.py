"""A structured output works with skills in both modes (issue 24): the final-answer tool is
offered beside the skill tools, the skill's body and tools reach the request that answers, the
answer is the validated instance, and no projected body reaches the store."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from plait import Agent, ScriptedModel, ToolCall, ToolMessage, tool
from plait.messages import dump_messages
from plait.skills import MemorySource, SkillsMiddleware
from plait.skills.managed import RememberLoadedSkills, allow_all, create_skill_manager

BODY = "BODY-MARKER-5d1e: report the page count."


class Report(BaseModel):
    pages: int
    title: str


@tool
def pdf_info(path: str) -> str:
    """Page count and title of a PDF."""
    return f"{path}: 3 pages, 'Q3 plan'"


def _md(include_tools: str = "") -> str:
    meta = f"metadata:\n  include_tools: {include_tools}\n" if include_tools else ""
    return f"---\nname: pdf\ndescription: PDF work. Use for PDFs.\n{meta}---\n{BODY}\n"


@pytest.mark.parametrize("mode", ["tool", "native"])
async def test_managed_skills_with_a_typed_output(mode: str) -> None:
    manager = await create_skill_manager(
        sources=[MemorySource({"pdf": {"SKILL.md": _md()}})],
        gate=allow_all,
        skill_tools={"pdf": [pdf_info]},
        default_channel="inline",
    )
    answer: ToolCall | str = (
        ToolCall("c3", "final_result", {"pages": 3, "title": "Q3 plan"})
        if mode == "tool"
        else '{"pages": 3, "title": "Q3 plan"}'
    )
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "pdf"}),
            ToolCall("c2", "pdf_info", {"path": "a.pdf"}),
            answer,
        ]
    )
    agent: Agent[Report] = Agent(
        model,
        middleware=[RememberLoadedSkills(manager), *manager.middleware],
        output_type=Report,
        output_mode="tool" if mode == "tool" else "native",
    )
    result = await agent.run("how many pages has a.pdf?", thread_id="t")

    assert result.output == Report(pages=3, title="Q3 plan")
    last = model.requests[-1]
    names = [t.name for t in last.tools]
    assert "pdf_info" in names
    assert ("final_result" in names) == (mode == "tool")
    assert (last.output_schema is not None) == (mode == "native")
    assert BODY in dump_messages(last.messages)  # the projected body reached the model
    assert BODY not in dump_messages((await agent.store.load("t")).messages)
    model.assert_complete()


async def test_disclosure_skills_with_a_typed_output_and_an_included_tool() -> None:
    source = MemorySource({"pdf": {"SKILL.md": _md("pdf_info")}})
    model = ScriptedModel(
        [
            ToolCall("c1", "read_file", {"path": "/skills/pdf/SKILL.md"}),
            ToolCall("c2", "pdf_info", {"path": "a.pdf"}),
            ToolCall("c3", "final_result", {"pages": "three", "title": "Q3 plan"}),  # invalid
            ToolCall("c4", "final_result", {"pages": 3, "title": "Q3 plan"}),
        ]
    )
    agent: Agent[Report] = Agent(
        model,
        middleware=[SkillsMiddleware(sources=[source], tools=[pdf_info])],
        output_type=Report,
        output_mode="tool",
    )
    result = await agent.run("how many pages has a.pdf?", thread_id="t")

    assert result.output == Report(pages=3, title="Q3 plan")
    first_names = [t.name for t in model.requests[0].tools]
    assert "final_result" in first_names and "pdf_info" not in first_names
    assert {"final_result", "pdf_info"} <= {t.name for t in model.requests[-1].tools}
    errors = [
        m for m in result.new_messages if isinstance(m, ToolMessage) and m.tool_call_id == "c3"
    ]
    assert len(errors) == 1 and errors[0].result.is_error  # the model read why, pair intact
    model.assert_complete()
