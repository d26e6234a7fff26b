"""Disclosure mode's catalog: the prompt section, its budget and search, loading, diagnostics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plait import (
    Agent,
    ConfigurationError,
    DispatchContext,
    Message,
    Middleware,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    tool,
)
from plait.skills import (
    Code,
    FilesystemSource,
    MemorySource,
    Precedence,
    PromptFormat,
    SkillCatalogLoaded,
    SkillProblemFound,
    SkillsMiddleware,
)
from plait.skills.disclosure import DEFAULT_INSTRUCTIONS


def tool_data(message: Message) -> Any:
    """The data of a tool result, failing the test if ``message`` is not one."""
    assert isinstance(message, ToolMessage), message
    return message.data


def md(name: str, description: str = "Does a thing.", body: str = "Body.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


def many(count: int) -> MemorySource:
    return MemorySource(
        {
            f"skill-{i:04d}": {"SKILL.md": md(f"skill-{i:04d}", f"Handles topic {i} end to end.")}
            for i in range(count)
        }
    )


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return q


async def test_no_skills_means_no_catalog_and_no_skill_tools_at_all() -> None:
    model = ScriptedModel([ToolCall("c1", "read_file", {"path": "/skills/x/SKILL.md"}), "ok"])
    skills = SkillsMiddleware(sources=[MemorySource()], tools=[lookup])
    agent = Agent(model, tools=[], middleware=[skills], system_prompt="Base.")
    result = await agent.run("go", thread_id="t")
    for request in model.requests:
        assert request.system_prompt == "Base."
        assert request.tools == []
    assert tool_data(result.new_messages[2]).startswith("Unknown tool 'read_file'.")
    stored = await agent.store.load("t")
    assert stored.state["skills_metadata"]["count"] == 0
    model.assert_complete()


async def test_catalog_follows_the_system_prompt_with_instructions_names_and_paths() -> None:
    source = MemorySource({"pdf": {"SKILL.md": md("pdf", "Fill PDF forms.")}})
    model = ScriptedModel(["ok"])
    await Agent(model, middleware=[SkillsMiddleware(sources=[source])], system_prompt="Hi.").run(
        "go"
    )
    assert model.requests[0].system_prompt == (
        f"Hi.\n\n{DEFAULT_INSTRUCTIONS}\n\n- **pdf**: Fill PDF forms. — path: /skills/pdf/SKILL.md"
    )
    model.assert_complete()


async def test_xml_format_and_no_instructions() -> None:
    source = MemorySource({"pdf": {"SKILL.md": md("pdf", "Fill <PDF> forms.")}})
    model = ScriptedModel(["ok"])
    skills = SkillsMiddleware(sources=[source], format=PromptFormat.XML, instructions=None)
    await Agent(model, middleware=[skills]).run("go")
    assert model.requests[0].system_prompt == (
        "<available_skills>\n<skill>\n<name>\npdf\n</name>\n<description>\n"
        "Fill &lt;PDF&gt; forms.\n</description>\n<location>\n/skills/pdf/SKILL.md\n"
        "</location>\n</skill>\n</available_skills>"
    )
    model.assert_complete()


async def test_past_the_budget_search_skills_finds_the_rest_by_keyword() -> None:
    model = ScriptedModel([ToolCall("c1", "search_skills", {"query": "topic 150"}), "ok"])
    skills = SkillsMiddleware(sources=[many(200)], budget=2_000, instructions=None)
    result = await Agent(model, middleware=[skills]).run("go")
    prompt = model.requests[0].system_prompt
    assert len(prompt) <= 2_000
    assert prompt.endswith(
        "not listed here. Call search_skills(query) with a few keywords to find them.)"
    )
    assert "**skill-0150**" not in prompt
    assert [t.name for t in model.requests[0].tools] == ["read_file", "search_skills"]
    found = tool_data(result.new_messages[2])
    assert found.splitlines()[1] == (
        "- **skill-0150**: Handles topic 150 end to end. — path: /skills/skill-0150/SKILL.md"
    )
    under = ScriptedModel(["ok"])
    await Agent(under, middleware=[SkillsMiddleware(sources=[many(3)], budget=2_000)]).run("go")
    assert [t.name for t in under.requests[0].tools] == ["read_file"]


async def test_catalog_is_rendered_once_per_catalog_generation_not_per_call() -> None:
    source = many(50)
    skills = SkillsMiddleware(sources=[source], budget=1_000)
    searches = [ToolCall(f"c{i}", "search_skills", {"query": "x"}) for i in range(2)]
    model = ScriptedModel([*searches, "done"])
    agent = Agent(model, middleware=[skills])
    await agent.run("go", thread_id="a")
    first = skills.snapshot("a")
    assert first is not None and first.generation == 1
    model2 = ScriptedModel(["ok", "ok"])
    agent2 = Agent(model2, middleware=[skills])
    await agent2.run("go", thread_id="b")  # a new thread, nothing changed: same render
    assert skills.snapshot("b") is first
    assert model2.requests[0].system_prompt == model.requests[0].system_prompt
    assert model.requests[1].system_prompt is model.requests[2].system_prompt
    source.put("new", {"SKILL.md": md("new")})
    await agent2.run("go", thread_id="b", state={"skills_metadata": None})
    second = skills.snapshot("b")
    assert second is not None and second is not first and second.generation == 2
    assert skills.snapshot("a") is first  # the other thread keeps its rendered snapshot


async def test_later_source_wins_by_default_and_precedence_is_configurable() -> None:
    base = MemorySource({"pdf": {"SKILL.md": md("pdf", "Base PDF.")}}, source_id="base")
    project = MemorySource(
        {"pdf": {"SKILL.md": md("pdf", "Project PDF.")}}, source_id="project", mount="/project"
    )
    for precedence, expected in (
        (None, "- **pdf**: Project PDF. — path: /project/pdf/SKILL.md"),
        (Precedence.FIRST_WINS, "- **pdf**: Base PDF. — path: /skills/pdf/SKILL.md"),
    ):
        model = ScriptedModel(["ok"])
        kwargs: dict[str, Any] = {} if precedence is None else {"precedence": precedence}
        skills = SkillsMiddleware(sources=[base, project], instructions=None, **kwargs)
        await Agent(model, middleware=[skills]).run("go")
        assert model.requests[0].system_prompt == expected
    model.assert_complete()


async def test_load_diagnostics_reach_the_caller_as_events_and_the_model_as_a_note(
    tmp_path: Path,
) -> None:
    source = MemorySource(
        {
            "good": {"SKILL.md": md("good")},
            "broken": {"SKILL.md": "---\nname: broken\n---\n"},
            "bad-yaml": {"SKILL.md": "---\nname: [\n---\nBody.\n"},
            "Mixed": {"SKILL.md": md("Mixed")},
        }
    )
    missing = FilesystemSource(tmp_path / "missing", source_id="team")
    model = ScriptedModel(["ok"])
    skills = SkillsMiddleware(sources=[source, missing], instructions=None)
    result = await Agent(model, middleware=[skills]).run("go")
    prompt = model.requests[0].system_prompt
    assert prompt.splitlines()[-1] == (
        "Note: 2 skills could not be loaded: bad-yaml (invalid yaml), broken (missing "
        "description). 1 skill source failed to load: team. Tell the user if they ask for one "
        "of these."
    )
    problems = [e for e in result.events if isinstance(e, SkillProblemFound)]
    skipped = {(e.skill, e.diagnostic.code) for e in problems if e.skipped}
    assert skipped == {("bad-yaml", Code.INVALID_YAML), ("broken", Code.MISSING_DESCRIPTION)}
    others = {(e.source_id, e.skill, e.diagnostic.code) for e in problems if not e.skipped}
    assert ("team", None, Code.SOURCE_UNAVAILABLE) in others
    assert ("memory", "Mixed", Code.NAME_NOT_LOWERCASE) in others
    loaded = [e for e in result.events if isinstance(e, SkillCatalogLoaded)]
    assert [(e.skills, e.skipped) for e in loaded] == [(2, 2)]
    model.assert_complete()


async def test_the_note_is_bounded_and_shown_even_when_no_skill_loaded() -> None:
    source = MemorySource({f"b{i:02d}": {"SKILL.md": "---\nname: x\n---\n"} for i in range(12)})
    model = ScriptedModel(["ok"])
    await Agent(model, middleware=[SkillsMiddleware(sources=[source])], system_prompt="S.").run(
        "go"
    )
    assert model.requests[0].system_prompt == (
        "S.\n\nNote: 12 skills could not be loaded: b00 (missing description), b01 (missing "
        "description), b02 (missing description), b03 (missing description), b04 (missing "
        "description), and 7 more. Tell the user if they ask for one of these."
    )
    assert model.requests[0].tools == []
    model.assert_complete()


async def test_thread_state_is_a_small_json_summary_even_for_1000_skills() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[many(1000)])])
    await agent.run("go", thread_id="t")
    state = (await agent.store.load("t")).state
    value = state["skills_metadata"]
    assert set(value) == {"count", "skipped", "digest"}
    assert value["count"] == 1000
    assert len(json.dumps(state)) < 120
    model.assert_complete()


async def test_each_thread_keeps_its_own_list_until_it_resets() -> None:
    source = MemorySource({"a": {"SKILL.md": md("a")}})
    model = ScriptedModel(["1", "2", "3", "4"])
    skills = SkillsMiddleware(sources=[source], refresh_interval=0)
    agent = Agent(model, middleware=[skills])
    await agent.run("go", thread_id="old")
    source.put("b", {"SKILL.md": md("b")})
    await agent.run("go", thread_id="new")  # a new thread loads the current skills
    await agent.run("go", thread_id="old")  # the old thread keeps its list
    assert "**b**" in model.requests[1].system_prompt
    assert "**b**" not in model.requests[2].system_prompt
    await agent.run("go", thread_id="old", state={"skills_metadata": None})
    assert "**b**" in model.requests[3].system_prompt
    model.assert_complete()


async def test_a_new_process_reloads_a_thread_and_reports_it_restored() -> None:
    source = MemorySource({"a": {"SKILL.md": md("a")}})
    model = ScriptedModel(["1", "2"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[source])])
    await agent.run("go", thread_id="t")
    restarted = Agent(model, middleware=[SkillsMiddleware(sources=[source])], store=agent.store)
    result = await restarted.run("go", thread_id="t")
    assert [e.reason for e in result.events if isinstance(e, SkillCatalogLoaded)] == ["restored"]
    assert model.requests[1].system_prompt == model.requests[0].system_prompt
    model.assert_complete()


async def test_max_threads_drops_the_least_recent_snapshot() -> None:
    source = MemorySource({"a": {"SKILL.md": md("a")}})
    skills = SkillsMiddleware(sources=[source], max_threads=1)
    agent = Agent(ScriptedModel(["1", "2", "3"]), middleware=[skills])
    await agent.run("go", thread_id="x")
    await agent.run("go", thread_id="y")
    assert skills.snapshot("x") is None and skills.snapshot("y") is not None
    result = await agent.run("go", thread_id="x")
    assert [e.reason for e in result.events if isinstance(e, SkillCatalogLoaded)] == ["restored"]


async def test_auto_refresh_picks_up_changes_before_each_turn_without_a_reset() -> None:
    source = MemorySource({"a": {"SKILL.md": md("a")}})
    model = ScriptedModel(["1", "2", "3"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[source], auto_refresh=True)])
    await agent.run("go", thread_id="t")
    unchanged = await agent.run("go", thread_id="t")
    assert not [e for e in unchanged.events if isinstance(e, SkillCatalogLoaded)]
    source.put("a", {"SKILL.md": md("a", "Edited.")})
    source.put("b", {"SKILL.md": md("b")})
    changed = await agent.run("go", thread_id="t")
    loaded = [e for e in changed.events if isinstance(e, SkillCatalogLoaded)]
    assert [(e.reason, e.added, e.changed) for e in loaded] == [("auto_refresh", ["b"], ["a"])]
    assert "- **a**: Edited." in model.requests[2].system_prompt
    assert "**b**" in model.requests[2].system_prompt
    model.assert_complete()


async def test_auto_refresh_interval_is_checked_before_every_model_call() -> None:
    source = MemorySource({"a": {"SKILL.md": md("a")}})

    class AddSkill(Middleware):
        async def after_model_call(
            self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
        ) -> ModelResponse:
            source.put("b", {"SKILL.md": md("b")})
            return response

    model = ScriptedModel([ToolCall("c1", "read_file", {"path": "/skills/a/SKILL.md"}), "ok"])
    skills = SkillsMiddleware(sources=[source], auto_refresh=0.0)
    await Agent(model, middleware=[AddSkill(), skills]).run("go")
    assert "**b**" not in model.requests[0].system_prompt
    assert "**b**" in model.requests[1].system_prompt
    model.assert_complete()


async def test_paths_become_filesystem_sources_and_bad_settings_are_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "pdf").mkdir()
    (tmp_path / "pdf" / "SKILL.md").write_text(md("pdf"))
    model = ScriptedModel(["ok"])
    await Agent(model, middleware=[SkillsMiddleware(sources=[str(tmp_path)])]).run("go")
    assert str((tmp_path / "pdf" / "SKILL.md").resolve()) in model.requests[0].system_prompt
    with pytest.raises(ConfigurationError):
        SkillsMiddleware(sources=[], budget=0)
    with pytest.raises(ConfigurationError):
        SkillsMiddleware(sources=[], max_threads=0)
    with pytest.raises(ConfigurationError):
        SkillsMiddleware(sources=[], read_max_chars=10)
    with pytest.raises(ConfigurationError, match="share the name"):
        SkillsMiddleware(sources=[], tools=[lookup, lookup])


async def test_a_name_collision_within_one_source_is_reported_for_the_losing_skill() -> None:
    source = MemorySource(
        {"a": {"SKILL.md": md("x", "First.")}, "b": {"SKILL.md": md("x", "Second.")}}
    )
    model = ScriptedModel(["ok"])
    result = await Agent(model, middleware=[SkillsMiddleware(sources=[source])]).run("go")
    assert "- **x**: Second." in model.requests[0].system_prompt  # the later one wins
    shadowed = [
        (e.source_id, e.skill)
        for e in result.events
        if isinstance(e, SkillProblemFound) and e.diagnostic.code is Code.NAME_SHADOWED
    ]
    assert shadowed == [("memory", "a")]
    model.assert_complete()
