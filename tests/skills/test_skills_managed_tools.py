"""Managed mode: the lifecycle tools, the gate, error texts and tool-name collisions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from plait import Agent, DispatchContext, Limits, ScriptedModel, ToolCall, ToolMessage, tool
from plait.errors import ConfigurationError
from plait.messages import Message, ToolDefinition
from plait.skills import MemorySource
from plait.skills.managed import (
    ScriptConfig,
    SkillManager,
    SkillToolCollision,
    SkillToolInvalid,
    allow_all,
    create_skill_manager,
)
from plait.skills.managed.prepare import TOOL_NAME
from plait.skills.managed.tools import LIFECYCLE_TOOL_NAMES
from plait.tools import Tool


def skill_md(name: str, body: str = "Body.", description: str = "") -> str:
    description = description or f"Handles {name} files. Use for {name}."
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


@tool
def pdf_extract(path: str) -> str:
    """Extract the text of a PDF."""
    return f"text of {path}"


@tool
def csv_rows(path: str) -> int:
    """Count rows."""
    return 3


def two_skills(**extra: Mapping[str, str]) -> MemorySource:
    return MemorySource(
        {
            "pdf": {"SKILL.md": skill_md("pdf", "PDF body.")},
            "csv": {
                "SKILL.md": skill_md("csv", "CSV body.", "Tabular data. Use for spreadsheets.")
            },
            **extra,
        }
    )


async def make(src: MemorySource | None = None, **options: Any) -> SkillManager:
    options.setdefault("gate", allow_all)
    options.setdefault("skill_tools", {"pdf": [pdf_extract], "csv": [csv_rows]})
    return await create_skill_manager(sources=[src or two_skills()], **options)


async def run(m: SkillManager, *script: Any, tools: Any = ()) -> dict[str, ToolMessage]:
    model = ScriptedModel([*script, "done"])
    result = await Agent(model, tools=tools, middleware=[*m.middleware]).run("go")
    return results(result.new_messages)


def results(messages: list[Message]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


async def test_lifecycle_tools_and_which_are_sequential() -> None:
    m = await make()
    tools = {t.name: t for t in m.tools()}
    assert tuple(tools) == LIFECYCLE_TOOL_NAMES
    sequential = {n for n, t in tools.items() if t.definition.metadata.get("sequential")}
    assert sequential == {"load_skill", "unload_skill", "refresh_skills"}
    assert tools["load_skill"].definition.parameters["required"] == ["skill"]
    assert m.middleware.turn_input.tools() == m.tools()


@pytest.mark.parametrize("style", ["raise", "async-raise", "return-false"])
async def test_gate_refusal_reaches_the_model_as_error_denied(style: str) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def gate(ctx: DispatchContext, name: str, args: Mapping[str, Any]) -> bool | None:
        assert isinstance(ctx, DispatchContext)
        calls.append((name, dict(args)))
        if style == "raise":
            raise PermissionError("not in this session")
        return False

    async def async_gate(ctx: DispatchContext, name: str, args: Mapping[str, Any]) -> None:
        calls.append((name, dict(args)))
        raise PermissionError("not in this session")

    m = await make(gate=async_gate if style == "async-raise" else gate)
    await m.load("csv")
    out = await run(
        m,
        ToolCall("c1", "load_skill", {"skill": "pdf"}),
        ToolCall("c2", "unload_skill", {"skill": "csv"}),
        ToolCall("c3", "refresh_skills", {}),
        ToolCall("c4", "csv_rows", {"path": "x"}),
        ToolCall("c5", "list_skills", {}),
    )
    reason = ": not in this session" if style != "return-false" else "."
    assert out["c1"].text == f"Error (DENIED): load_skill was refused by the gate{reason}"
    assert out["c2"].text == f"Error (DENIED): unload_skill was refused by the gate{reason}"
    assert out["c3"].text == f"Error (DENIED): refresh_skills was refused by the gate{reason}"
    assert out["c4"].text == f"Error (DENIED): csv_rows was refused by the gate{reason}"
    assert all(out[c].is_error for c in ("c1", "c2", "c3", "c4"))  # typed as errors
    assert not out["c5"].text.startswith("Error")  # read-only tools are not gated
    assert calls == [
        ("load_skill", {"skill": "pdf"}),
        ("unload_skill", {"skill": "csv"}),
        ("refresh_skills", {"skill": None}),
        ("csv_rows", {"path": "x"}),
    ]
    assert m.loaded() == ["csv"]


async def test_not_found_and_not_loaded_reach_the_model_as_errors() -> None:
    m = await make()
    out = await run(
        m,
        ToolCall("c1", "load_skill", {"skill": "nope"}),
        ToolCall("c2", "unload_skill", {"skill": "pdf"}),
        ToolCall("c3", "read_skill_body", {"handle": "pdf"}),
        ToolCall("c4", "refresh_skills", {"skill": "pdf"}),
    )
    assert out["c1"].text.startswith("Error (NOT_FOUND): Skill 'nope' not found. Known skills: ")
    assert out["c2"].text.startswith("Error (NOT_LOADED): Skill not loaded: pdf.")
    assert out["c3"].text.startswith("Error (NOT_LOADED): Skill not loaded: pdf.")
    assert out["c4"].text.startswith("Error (NOT_LOADED):")
    loaded_twice = await run(
        m,
        ToolCall("c1", "load_skill", {"skill": "pdf"}),
        ToolCall("c2", "load_skill", {"skill": "pdf"}),
    )
    assert loaded_twice["c2"].text.startswith("Error (ALREADY_LOADED): Skill already loaded: pdf")


async def test_list_skills_filters_and_can_refresh() -> None:
    src = two_skills()
    m = await make(src)
    await m.load("pdf")
    src.put("xlsx", {"SKILL.md": skill_md("xlsx")})
    out = await run(
        m,
        ToolCall("c1", "list_skills", {}),
        ToolCall("c2", "list_skills", {"query": "SPREADSHEET"}),
        ToolCall("c3", "list_skills", {"refresh": True}),
    )
    listed = json.loads(out["c1"].text)["skills"]
    assert [(s["name"], s["loaded"]) for s in listed] == [("csv", False), ("pdf", True)]
    assert listed[0]["id"] == "memory:csv"
    assert [s["name"] for s in json.loads(out["c2"].text)["skills"]] == ["csv"]
    assert {s["name"] for s in json.loads(out["c3"].text)["skills"]} == {"csv", "pdf", "xlsx"}


async def test_list_skills_query_ranks_by_relevance_with_the_shared_ranker() -> None:
    filler = {
        f"tool-{i}": {"SKILL.md": skill_md(f"tool-{i}", description=f"Handles chores {i}.")}
        for i in range(30)
    }
    src = two_skills(**filler)
    m = await make(src)
    out = await run(
        m,
        ToolCall("c1", "list_skills", {"query": "rows of my spreadsheets", "limit": 3}),
        ToolCall("c2", "list_skills", {"query": "chores", "limit": 2}),
        ToolCall("c3", "list_skills", {"query": "zebras"}),
    )
    ranked = json.loads(out["c1"].text)["skills"]
    assert ranked[0]["name"] == "csv"
    assert len(json.loads(out["c2"].text)["skills"]) == 2
    assert json.loads(out["c3"].text) == {"skills": []}
    assert [s.name for s in m.search("pdf files", 1)] == ["pdf"]
    src.put("pdf", {"SKILL.md": skill_md("pdf", description="Now about zebras.")})
    await m.refresh()
    assert [s.name for s in m.search("zebras", 5)] == ["pdf"]  # re-indexed after the refresh


async def test_list_skills_without_a_query_is_bounded_and_says_how_many_are_left() -> None:
    # Before: list_skills() returned every skill of the catalog, however many.
    filler = {f"s-{i:03d}": {"SKILL.md": skill_md(f"s-{i:03d}")} for i in range(260)}
    m = await make(MemorySource(filler))
    out = await run(m, ToolCall("c1", "list_skills", {}))
    listed = json.loads(out["c1"].text)
    assert len(listed["skills"]) == 200 and listed["more"] == 60
    assert "query" in listed["note"]


async def test_list_skills_hides_shadowed_and_model_hidden_skills() -> None:
    hidden = "---\nname: deploy\ndescription: Deploys.\ndisable-model-invocation: true\n---\nB\n"
    first = MemorySource({"pdf": {"SKILL.md": skill_md("pdf")}}, source_id="a")
    second = MemorySource(
        {"pdf": {"SKILL.md": skill_md("pdf")}, "deploy": {"SKILL.md": hidden}}, source_id="b"
    )
    m = await create_skill_manager(sources=[first, second], gate=allow_all)
    out = await run(
        m,
        ToolCall("c1", "list_skills", {}),
        ToolCall("c2", "load_skill", {"skill": "deploy"}),
    )
    assert [s["id"] for s in json.loads(out["c1"].text)["skills"]] == ["a:pdf"]
    assert out["c2"].text.startswith("Error (NOT_FOUND)")


async def test_list_loaded_skills_reports_initialized_and_projected() -> None:
    m = await make()
    await m.load("pdf")
    out = await run(m, ToolCall("c1", "list_loaded_skills", {}))
    report = json.loads(out["c1"].text)
    assert report["initialized"] == ["pdf"]
    [projected] = report["projected"]
    assert projected["skill"] == "pdf" and projected["tools"] == ["pdf_extract"]
    assert projected["handle"] == m.record("pdf").handle


async def test_read_skill_body_by_handle_and_stale_handles() -> None:
    src = two_skills()
    m = await make(src)
    await m.load("pdf")
    old_handle = m.record("pdf").handle
    out = await run(m, ToolCall("c1", "read_skill_body", {"handle": old_handle}))
    assert out["c1"].data.startswith("[skill body of pdf omitted")  # persisted form
    src.put("pdf", {"SKILL.md": skill_md("pdf", "PDF body v2.")})
    await m.refresh_and_project()
    stale = await run(m, ToolCall("c1", "read_skill_body", {"handle": old_handle}))
    assert stale["c1"].text.startswith(f"Error (NOT_LOADED): Skill not loaded: {old_handle}")


async def test_load_result_tells_the_model_how_to_read_the_body() -> None:
    m = await make()
    out = await run(m, ToolCall("c1", "load_skill", {"skill": "pdf"}))
    loaded = json.loads(out["c1"].text)
    assert loaded["channel"] == "handle" and loaded["tools"] == ["pdf_extract"]
    assert f'read_skill_body(handle="{loaded["handle"]}")' in loaded["note"]


# --- collisions --------------------------------------------------------------------------------


async def test_two_skills_with_one_tool_name_collide_at_load() -> None:
    m = await make(skill_tools={"pdf": [pdf_extract], "csv": [pdf_extract]})
    await m.load("pdf")
    with pytest.raises(SkillToolCollision) as info:
        await m.load("csv")
    assert info.value.code == "TOOL_COLLISION"
    assert "taken by a tool of skill 'pdf'" in str(info.value)
    assert m.loaded() == ["pdf"]


async def test_skill_tool_colliding_with_an_agent_tool_is_refused_at_load() -> None:
    m = await make()

    @tool(name="pdf_extract")
    def agent_pdf_extract(path: str) -> str:
        """The agent's own tool."""
        return "agent"

    out = await run(m, ToolCall("c1", "load_skill", {"skill": "pdf"}), tools=[agent_pdf_extract])
    assert out["c1"].text.startswith("Error (TOOL_COLLISION): Skill 'pdf' has a tool named")
    assert "a tool of the agent or of another middleware" in out["c1"].text
    assert m.loaded() == []


async def test_skill_tool_may_not_take_a_lifecycle_tool_name() -> None:
    shadow = type(pdf_extract)(pdf_extract.fn, name="load_skill")
    m = await make(skill_tools={"pdf": [shadow]})
    with pytest.raises(SkillToolCollision, match="lifecycle tool"):
        await m.load("pdf")


async def test_tool_names_must_follow_the_rule_and_be_unique_within_a_skill() -> None:
    assert TOOL_NAME.pattern == "^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
    # FunctionTool refuses such names itself; other Tool classes meet the skill's own check.
    with pytest.raises(ConfigurationError, match="not a valid tool name"):
        type(pdf_extract)(pdf_extract.fn, name="pdf extract")
    bad = Tool(ToolDefinition("pdf extract", "Extract.", {}))
    m = await make(skill_tools={"pdf": [bad]})
    with pytest.raises(SkillToolInvalid, match="does not match"):
        await m.load("pdf")
    m = await make(skill_tools={"pdf": [pdf_extract, pdf_extract]})
    with pytest.raises(SkillToolInvalid, match="two tools named"):
        await m.load("pdf")
    m = await make(skill_tools={"pdf": [Tool(ToolDefinition("x" * 65, "Long.", {}))]})
    with pytest.raises(SkillToolInvalid):
        await m.load("pdf")


async def test_script_tool_colliding_with_a_skill_tool_is_a_duplicate() -> None:
    src = MemorySource({"pdf": {"SKILL.md": skill_md("pdf"), "scripts/extract.py": "print(1)\n"}})
    clash = type(pdf_extract)(pdf_extract.fn, name="run_pdf_extract")
    m = await make(src, skill_tools={"pdf": [clash]}, scripts=ScriptConfig(timeout=5))
    with pytest.raises(SkillToolInvalid, match="two tools named 'run_pdf_extract'"):
        await m.load("pdf")
    assert m.loaded() == []


async def test_a_skill_tool_keeps_its_own_timeout() -> None:
    # A skill's tool declares how long it may run; wrapping it for the registry (gate, in-flight
    # count) must not replace that with the agent-wide Limits.tool_timeout.
    @tool(timeout=30)
    async def slow_extract(path: str) -> str:
        """Extract slowly."""
        await asyncio.sleep(0.3)
        return f"slow text of {path}"

    m = await make(skill_tools={"pdf": [slow_extract]})
    await m.load("pdf")
    model = ScriptedModel([ToolCall("c1", "slow_extract", {"path": "a.pdf"}), "done"])
    agent = Agent(model, middleware=[*m.middleware], limits=Limits(tool_timeout=0.05))
    result = await agent.run("go")
    [message] = [x for x in result.new_messages if isinstance(x, ToolMessage)]
    assert (message.text, message.is_error) == ("slow text of a.pdf", False)
    await m.aclose()
