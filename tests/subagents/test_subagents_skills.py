"""Skills in subagents: a child that shares the parent's ``SkillsMiddleware``, or has skills of
either mode over ``inherited_sources``, reads the parent's catalog without a second discovery
walk; a child with its own sources walks only those."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from plait import Agent
from plait.errors import ConfigurationError
from plait.messages import ToolCall, ToolMessage
from plait.models.scripted import ScriptedModel
from plait.skills import SkillsMiddleware
from plait.skills.inherited import inherited_sources
from plait.skills.managed import allow_all, create_skill_manager
from plait.skills.model import DiscoveryItem
from plait.skills.sources.memory import MemorySource
from plait.subagents import Subagent, Subagents


def md(name: str) -> str:
    return f"---\nname: {name}\ndescription: {name} work. Use for {name}.\n---\nDo {name}.\n"


class CountingSource(MemorySource):
    """A memory source that counts its discovery walks."""

    walks = 0

    async def discover(self) -> AsyncIterator[DiscoveryItem]:
        self.walks += 1
        async for item in super().discover():
            yield item


def task(call_id: str, name: str, text: str) -> ToolCall:
    return ToolCall(call_id, "task", {"subagent_type": name, "description": text})


async def test_a_child_inherits_the_parents_catalog_without_a_second_walk() -> None:
    shared = CountingSource({"pdf": {"SKILL.md": md("pdf")}})
    own = CountingSource({"sql": {"SKILL.md": md("sql")}})
    skills = SkillsMiddleware(sources=[shared])
    heir_model = ScriptedModel(["heir done", "heir again"])
    loner_model = ScriptedModel(["loner done"])
    heir = Agent(heir_model, middleware=[skills])  # the parent's instance: its catalog
    loner = Agent(loner_model, middleware=[SkillsMiddleware(sources=[own])])
    parent_model = ScriptedModel(
        [
            [task("c1", "heir", "Use a skill."), task("c2", "loner", "Use yours.")],
            "ok",
            task("c3", "heir", "Again."),
            "ok again",
        ]
    )
    agent = Agent(
        parent_model,
        middleware=[
            skills,
            Subagents({"heir": Subagent("Inherits.", heir), "loner": Subagent("Own.", loner)}),
        ],
    )
    result = await agent.run("Go.", thread_id="p")
    assert result.output == "ok"
    assert [m.data for m in result.new_messages if isinstance(m, ToolMessage)] == [
        "heir done",
        "loner done",
    ]
    # One walk of the parent's source serves the parent and the child that inherits it.
    assert shared.walks == 1
    assert own.walks == 1
    assert "pdf" in parent_model.requests[0].system_prompt
    assert "pdf" in heir_model.requests[0].system_prompt
    assert "sql" not in heir_model.requests[0].system_prompt
    assert "sql" in loner_model.requests[0].system_prompt
    assert "pdf" not in loner_model.requests[0].system_prompt
    # Each thread keeps its own skills state (the child's in the child's thread).
    assert skills.snapshot("p") is not None and skills.snapshot("p/c1") is not None
    assert skills.snapshot("p/c2") is None
    # A second delegation on the same parent: still no new walk.
    again = await agent.run("Again.", thread_id="p")
    assert again.output == "ok again" and shared.walks == 1


async def test_children_in_both_modes_over_the_parents_catalog_walk_it_once() -> None:
    source = CountingSource({"pdf": {"SKILL.md": md("pdf")}, "sql": {"SKILL.md": md("sql")}})
    skills = SkillsMiddleware(sources=[source])
    manager = await create_skill_manager(sources=inherited_sources(skills), gate=allow_all)
    managed_model = ScriptedModel([ToolCall("l1", "load_skill", {"skill": "sql"}), "sql loaded"])
    managed = Agent(managed_model, middleware=[*manager.middleware])
    reader_model = ScriptedModel(["read the list"])
    reader = Agent(
        reader_model,
        middleware=[SkillsMiddleware(sources=inherited_sources(skills), instructions="Mine:")],
    )
    parent_model = ScriptedModel(
        [[task("c1", "managed", "Load sql."), task("c2", "reader", "Look.")], "ok"]
    )
    agent = Agent(
        parent_model,
        middleware=[
            skills,
            Subagents(
                {"managed": Subagent("Managed.", managed), "reader": Subagent("Reads.", reader)}
            ),
        ],
    )
    try:
        result = await agent.run("Go.", thread_id="p")
    finally:
        await manager.aclose()
    assert result.output == "ok"
    assert source.walks == 1  # create_skill_manager's discovery loaded the parent's catalog
    [loaded, read] = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert (loaded.data, read.data) == ("sql loaded", "read the list")
    # The managed child loaded sql through the parent's source; the reader lists both skills
    # under its own instructions.
    [load_result] = [m for m in managed_model.requests[1].messages if isinstance(m, ToolMessage)]
    assert isinstance(load_result.data, dict) and load_result.data["skill"] == "sql"
    prompt = reader_model.requests[0].system_prompt
    assert "Mine:" in prompt and "pdf" in prompt and "sql" in prompt
    assert "pdf" in parent_model.requests[0].system_prompt


def test_inherited_sources_needs_a_catalog() -> None:
    with pytest.raises(ConfigurationError, match="SkillsMiddleware or a SkillCatalog"):
        inherited_sources(object())  # type: ignore[arg-type]
