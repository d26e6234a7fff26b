"""A turn paused inside managed-skills and disclosure turns resumes with its projections and
skill tools right (issue 26): the resumed request carries the skill body and the skill's tools,
the approved skill tool runs, and no body reaches the store."""

from __future__ import annotations

from pathlib import Path

from plait import Agent, ScriptedModel, ToolCall, ToolMessage, tool
from plait.messages import dump_messages
from plait.runtime import ApprovalMiddleware, Approve
from plait.skills import MemorySource, SkillsMiddleware
from plait.skills.managed import (
    RememberLoadedSkills,
    SkillManager,
    allow_all,
    create_skill_manager,
)
from plait.stores.sqlite import SQLiteThreadStore

BODY = "BODY-MARKER-91c3 follow these steps."


@tool
def pdf_extract(path: str) -> str:
    """Extract the text of a PDF."""
    return f"text of {path}"


async def _manager() -> SkillManager:
    md = f"---\nname: pdf\ndescription: PDF work. Use for PDFs.\n---\n{BODY}\n"
    return await create_skill_manager(
        sources=[MemorySource({"pdf": {"SKILL.md": md}})],
        gate=allow_all,
        skill_tools={"pdf": [pdf_extract]},
        default_channel="inline",
    )


async def test_a_pause_on_a_managed_skill_tool_resumes_with_the_body_and_the_tool(
    tmp_path: Path,
) -> None:
    store = SQLiteThreadStore(tmp_path / "t.db")
    first = await _manager()
    script = [
        ToolCall("c1", "load_skill", {"skill": "pdf"}),
        ToolCall("c2", "pdf_extract", {"path": "a.pdf"}),
    ]
    gate = ApprovalMiddleware(["pdf_extract"])
    chain = [RememberLoadedSkills(first), *first.middleware, gate]
    paused = await Agent(ScriptedModel(script), middleware=chain, store=store).run(
        "read a.pdf", thread_id="t"
    )
    assert [(p.name, p.skill) for p in paused.pending] == [("pdf_extract", "pdf")]
    snapshot = await store.load("t")
    assert BODY not in dump_messages(snapshot.messages) and BODY not in str(snapshot.state)

    # A new manager and agent on the same store, as in another process.
    second = await _manager()
    model = ScriptedModel(["done"])
    chain = [RememberLoadedSkills(second), *second.middleware, gate]
    agent = Agent(model, middleware=chain, store=store)
    result = await agent.resume("t", {"c2": Approve()})

    assert result.output == "done"
    [request] = model.requests
    assert BODY in dump_messages(request.messages)  # the projection is back
    assert "pdf_extract" in [t.name for t in request.tools]
    results = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert results == {"c2": "text of a.pdf"}
    assert BODY not in dump_messages((await store.load("t")).messages)
    await store.aclose()


@tool(requires_approval=True)
def pdf_delete(path: str) -> str:
    """Delete a PDF."""
    return f"deleted {path}"


async def test_a_managed_skill_tool_that_requires_approval_is_held_with_its_skill() -> None:
    md = "---\nname: pdf\ndescription: PDF work. Use for PDFs.\n---\nBody.\n"
    manager = await create_skill_manager(
        sources=[MemorySource({"pdf": {"SKILL.md": md}})],
        gate=allow_all,
        skill_tools={"pdf": [pdf_delete]},
    )
    script: list[ToolCall | str] = [
        ToolCall("c1", "load_skill", {"skill": "pdf"}),
        ToolCall("c2", "pdf_delete", {"path": "a.pdf"}),
        "gone",
    ]
    agent = Agent(ScriptedModel(script), middleware=[*manager.middleware])
    paused = await agent.run("delete a.pdf", thread_id="t")
    assert [(p.id, p.skill) for p in paused.pending] == [("c2", "pdf")]
    result = await agent.resume("t", {"c2": Approve()})
    assert result.output == "gone"
    results = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert results == {"c2": "deleted a.pdf"}


@tool(requires_approval=True)
def alpha() -> str:
    """Alpha."""
    return "a"


def _md(name: str, include_tools: str) -> str:
    meta = f"metadata:\n  include_tools: {include_tools}\n"
    return f"---\nname: {name}\ndescription: The {name} skill.\n{meta}---\nBody of {name}.\n"


async def test_a_pause_on_a_disclosed_skill_tool_resumes_with_the_tool_still_visible() -> None:
    source = MemorySource({"s": {"SKILL.md": _md("s", "alpha")}})
    read = ToolCall("c1", "read_file", {"path": "/skills/s/SKILL.md"})
    agent = Agent(
        ScriptedModel([read, ToolCall("c2", "alpha")]),
        middleware=[SkillsMiddleware(sources=[source], tools=[alpha])],
    )
    paused = await agent.run("go", thread_id="t")
    assert [p.id for p in paused.pending] == ["c2"]

    model = ScriptedModel(["done"])
    resumed_agent = Agent(
        model, middleware=[SkillsMiddleware(sources=[source], tools=[alpha])], store=agent.store
    )
    result = await resumed_agent.resume("t", {"c2": Approve()})

    assert result.output == "done"
    assert [t.name for t in model.requests[0].tools] == ["read_file", "alpha"]
    results = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert results == {"c2": "a"}
