"""Review regressions for the managed mode (SkillManager)."""

from __future__ import annotations

import pytest

from plait import Agent, ScriptedModel, ToolCall, ToolMessage
from plait.skills import MemorySource
from plait.skills.managed import SkillLoadFailed, allow_all, create_skill_manager


def md(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: Handles {name}. Use for {name}.\n---\n{body}\n"


async def test_load_refuses_a_skill_md_edited_since_discovery() -> None:
    # Before: the new body was loaded under the old version, and refresh then flagged an
    # "update" (and refresh_skills swapped) a version that was already in place.
    src = MemorySource({"pdf": {"SKILL.md": md("pdf", "OLD")}})
    manager = await create_skill_manager(sources=[src], gate=allow_all)
    discovered = manager.catalog()[0].version
    src.put("pdf", {"SKILL.md": md("pdf", "NEW")})
    with pytest.raises(SkillLoadFailed, match="changed in its source since it was discovered"):
        await manager.load("pdf")
    assert manager.loaded() == []
    await manager.refresh()
    result = await manager.load("pdf")
    record = manager.record("pdf")
    assert (record.body.strip(), record.version) == ("NEW", result.version)
    assert record.version != discovered
    assert not record.update_available
    await manager.aclose()


async def test_the_model_is_told_to_refresh_and_can_then_load() -> None:
    src = MemorySource({"pdf": {"SKILL.md": md("pdf", "OLD")}})
    manager = await create_skill_manager(sources=[src], gate=allow_all)
    src.put("pdf", {"SKILL.md": md("pdf", "NEW")})
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "pdf"}),
            ToolCall("c2", "list_skills", {"refresh": True}),
            ToolCall("c3", "load_skill", {"skill": "pdf"}),
            "done",
        ]
    )
    agent = Agent(model, middleware=[*manager.middleware])
    result = await agent.run("go")
    tools = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert tools[0].is_error and "Error (LOAD_FAILED)" in tools[0].text
    assert "refresh=true" in tools[0].text
    assert not tools[2].is_error
    assert manager.record("pdf").body.strip() == "NEW"
    await manager.aclose()
