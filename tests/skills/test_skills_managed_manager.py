"""Managed mode: the manager API (configuration, load/unload, refresh and swap, dispose), and a
SKILL.md edited after discovery (load refuses it; the model is told to refresh)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from plait import Agent, ScriptedModel, Tool, ToolCall, ToolContext, ToolMessage, tool
from plait.skills import MemorySource, SkillEntry, SkillNotFound, SkillRef
from plait.skills.managed import (
    ErrorCode,
    InvalidSkillsConfig,
    SkillAlreadyLoaded,
    SkillLoaded,
    SkillLoadFailed,
    SkillManager,
    SkillManagerDisposed,
    SkillManagerError,
    SkillNotLoaded,
    SkillSwapFailed,
    SkillSwapped,
    SkillToolInvalid,
    SkillUnloaded,
    allow_all,
    create_skill_manager,
    render_error,
)


def skill_md(name: str, body: str = "Body.", **extra: str) -> str:
    lines = [f"name: {name}", f"description: Handles {name}. Use for {name}."]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n{body}\n"


@tool
def pdf_extract(path: str) -> str:
    """Extract the text of a PDF."""
    return f"text of {path}"


def source(source_id: str = "memory", **skills: str) -> MemorySource:
    return MemorySource(
        {name: {"SKILL.md": md} for name, md in skills.items()}, source_id=source_id
    )


async def make(src: MemorySource | None = None, **options: Any) -> SkillManager:
    options.setdefault("gate", allow_all)
    options.setdefault("skill_tools", {"pdf": [pdf_extract]})
    return await create_skill_manager(sources=[src or source(pdf=skill_md("pdf"))], **options)


async def test_configuration_errors_are_invalid_config(tmp_path: Path) -> None:
    one = [source(pdf=skill_md("pdf"))]
    bad: list[dict[str, Any]] = [
        {"sources": [], "gate": allow_all},
        {"sources": one, "gate": None},
        {"sources": one, "gate": allow_all, "default_channel": "email"},
        {"sources": one, "gate": allow_all, "skill_tools": 3},
        {"sources": [source(), source()], "gate": allow_all},
        {"sources": one, "gate": allow_all, "ranker": object()},
    ]
    for options in bad:
        with pytest.raises(InvalidSkillsConfig) as info:
            await create_skill_manager(**options)
        assert info.value.code is ErrorCode.INVALID_CONFIG
    from plait.skills import FilesystemSource

    with pytest.raises(InvalidSkillsConfig, match="does not exist"):
        await create_skill_manager(sources=[FilesystemSource(tmp_path / "nope")], gate=allow_all)


async def test_render_error_names_the_code() -> None:
    assert render_error(SkillNotFound("x", ["pdf"], hint="Call list_skills.")) == (
        "Error (NOT_FOUND): Skill 'x' not found. Known skills: pdf. Call list_skills."
    )
    codes = {cls.code for cls in SkillManagerError.__subclasses__()}
    assert {"ALREADY_LOADED", "NOT_LOADED", "TOOL_COLLISION", "DENIED"} <= codes
    assert {"SCRIPT_TIMEOUT", "SCRIPT_FAILED", "INVALID_CONFIG"} <= codes


async def test_load_by_name_id_or_ref_and_the_errors_around_it() -> None:
    m = await make()
    with pytest.raises(SkillNotFound) as info:
        await m.load("nope")
    assert render_error(info.value).startswith("Error (NOT_FOUND): Skill 'nope' not found.")
    assert "Known skills: pdf" in str(info.value)
    result = await m.load("memory:pdf")
    assert (result.skill, result.channel, result.tools) == ("pdf", "handle", ("pdf_extract",))
    assert result.handle == f"skill:pdf@{result.version}"
    with pytest.raises(SkillAlreadyLoaded):
        await m.load("pdf")
    assert await m.unload("pdf") == "pdf"
    with pytest.raises(SkillNotLoaded) as not_loaded:
        await m.unload("pdf")
    assert render_error(not_loaded.value).startswith("Error (NOT_LOADED): Skill not loaded: pdf")
    assert (await m.load("pdf", channel="inline")).channel == "inline"


async def test_catalog_lists_losing_candidates_and_load_state() -> None:
    first = source("project", pdf=skill_md("pdf", "Project body."))
    second = source("user", pdf=skill_md("pdf", "User body."), csv=skill_md("csv"))
    m = await create_skill_manager(sources=[first, second], gate=allow_all)
    await m.load("pdf")
    rows = {(str(e.ref), e.loaded, e.shadowed_by) for e in m.catalog()}
    assert rows == {
        ("project:pdf", True, None),
        ("user:pdf", False, SkillRef("project", "pdf")),
        ("user:csv", False, None),
    }
    assert "Project body." in m.record("pdf").body  # earlier source wins


async def test_skills_hidden_from_the_model_load_only_from_application_code() -> None:
    hidden = skill_md("deploy", **{"disable-model-invocation": "true"})
    m = await make(source(pdf=skill_md("pdf"), deploy=hidden))
    with pytest.raises(SkillNotFound):
        await m.load("deploy", invoked_by_model=True)
    assert (await m.load("deploy")).skill == "deploy"


async def test_load_failure_loads_nothing() -> None:
    def broken(entry: SkillEntry) -> Sequence[Tool]:
        raise RuntimeError("registry offline")

    m = await make(skill_tools=broken)
    with pytest.raises(SkillLoadFailed, match="registry offline"):
        await m.load("pdf")
    assert m.loaded() == []

    m = await make(skill_tools=lambda entry: ["not a tool"])
    with pytest.raises(SkillToolInvalid, match="not a plait Tool"):
        await m.load("pdf")


async def test_async_resolver_supplies_skill_tools_on_every_load() -> None:
    asked: list[str] = []

    async def resolve(entry: SkillEntry) -> Sequence[Tool]:
        asked.append(entry.name)
        return [pdf_extract]

    m = await make(skill_tools=resolve)
    assert (await m.load("pdf")).tools == ("pdf_extract",)
    record = m.record("pdf")
    owned = record.tools[0]
    assert owned is not pdf_extract
    assert owned.definition.metadata["skill"] == "pdf"
    assert owned.definition.metadata["skill_version"] == record.version
    assert "skill" not in pdf_extract.definition.metadata  # the original is not mutated
    assert asked == ["pdf"]


async def test_load_and_unload_emit_events_on_the_context() -> None:
    m = await make()
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "pdf"}),
            ToolCall("c2", "unload_skill", {"skill": "pdf"}),
            "done",
        ]
    )
    result = await Agent(model, middleware=[*m.middleware]).run("go")
    kinds = [type(e) for e in result.events if isinstance(e, SkillLoaded | SkillUnloaded)]
    assert kinds == [SkillLoaded, SkillUnloaded]


async def test_refresh_is_catalog_only_and_flags_updates() -> None:
    src = source(pdf=skill_md("pdf", "One."))
    m = await make(src)
    await m.load("pdf")
    old = m.record("pdf").version
    src.put("pdf", {"SKILL.md": skill_md("pdf", "Two.")})
    src.put("csv", {"SKILL.md": skill_md("csv")})
    report = await m.refresh()
    assert report.update_available == ("pdf",)
    assert [str(r) for r in report.added] == ["memory:csv"]
    assert m.record("pdf").version == old and "One." in m.record("pdf").body
    assert (await m.refresh("pdf")).update_available == ("pdf",)
    with pytest.raises(SkillNotFound):
        await m.refresh("nope")


async def test_refresh_and_project_swaps_only_after_the_new_version_prepared() -> None:
    src = source(pdf=skill_md("pdf", "One."))
    fail_next = {"on": False}

    def resolve(entry: SkillEntry) -> Sequence[Tool]:
        if fail_next["on"]:
            raise RuntimeError("new version is broken")
        return [pdf_extract]

    m = await make(src, skill_tools=resolve)
    await m.load("pdf")
    old = m.record("pdf")
    assert [o.status for o in await m.refresh_and_project(None, "pdf")] == ["unchanged"]

    src.put("pdf", {"SKILL.md": skill_md("pdf", "Two.")})
    fail_next["on"] = True
    [failed] = await m.refresh_and_project(None, "pdf")
    assert failed.status == "failed" and "new version is broken" in (failed.error or "")
    assert m.record("pdf") is old and not old.retired  # the old version stays loaded
    assert old.update_available

    fail_next["on"] = False
    [swapped] = await m.refresh_and_project(None)
    assert swapped.status == "swapped" and swapped.old_version == old.version
    assert "Two." in m.record("pdf").body and old.retired
    with pytest.raises(SkillNotLoaded):
        await m.refresh_and_project(None, "csv")


async def test_refresh_failure_through_the_tool_keeps_the_old_version_projected() -> None:
    src = source(pdf=skill_md("pdf", "One."))

    @tool
    def squat() -> str:
        """A tool whose name the manager already uses."""
        return "mine"

    def resolve(entry: SkillEntry) -> Sequence[Tool]:
        if entry.version != first_version[0]:
            return [pdf_extract, type(squat)(squat.fn, name="list_skills")]  # collides
        return [pdf_extract]

    first_version: list[str] = []
    m = await make(src, skill_tools=resolve)
    first_version.append(m.catalog()[0].version)
    await m.load("pdf")
    old = m.record("pdf")
    src.put("pdf", {"SKILL.md": skill_md("pdf", "Two.")})
    model = ScriptedModel(
        [
            ToolCall("c1", "refresh_skills", {"skill": "pdf"}),
            ToolCall("c2", "pdf_extract", {"path": "a"}),
            "done",
        ]
    )
    result = await Agent(model, middleware=[*m.middleware]).run("go")
    messages = {x.tool_call_id: x for x in result.new_messages if isinstance(x, ToolMessage)}
    assert messages["c1"].text.startswith("Error (REFRESH_FAILED): (TOOL_COLLISION)")
    assert messages["c1"].text.endswith("The old version stays loaded.")
    assert messages["c2"].data == "text of a"
    assert m.record("pdf") is old
    assert any(isinstance(e, SkillSwapFailed) for e in result.events)


async def test_swap_through_the_tool_emits_an_event_and_reprojects() -> None:
    src = source(pdf=skill_md("pdf", "One."))
    m = await make(src)
    await m.load("pdf")
    src.put("pdf", {"SKILL.md": skill_md("pdf", "Two.")})
    model = ScriptedModel([ToolCall("c1", "refresh_skills", {}), "done"])
    result = await Agent(model, middleware=[*m.middleware]).run("go")
    assert any(isinstance(e, SkillSwapped) for e in result.events)
    assert "Two." in m.record("pdf").body


async def test_a_skill_removed_from_its_source_fails_refresh_and_stays_loaded() -> None:
    src = source(pdf=skill_md("pdf"))
    m = await make(src)
    await m.load("pdf")
    src.remove("pdf")
    [outcome] = await m.refresh_and_project()
    assert (
        outcome.status == "failed"
        and "(NOT_FOUND) Skill 'memory:pdf' not found in its source" in (outcome.error or "")
    )
    assert m.loaded() == ["pdf"]


async def test_mutations_are_serialised_by_one_lock() -> None:
    gate_open, first_in = asyncio.Event(), asyncio.Event()
    entered: list[str] = []

    async def slow(entry: SkillEntry) -> Sequence[Tool]:
        entered.append(entry.name)
        first_in.set()
        await gate_open.wait()
        return [pdf_extract]

    m = await make(skill_tools=slow)
    first = asyncio.create_task(m.load("pdf"))
    second = asyncio.create_task(m.load("pdf"))
    await first_in.wait()
    await asyncio.sleep(0)  # let the second load run up to the lock
    assert entered == ["pdf"]  # the second load waits for the lock
    gate_open.set()
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert sum(isinstance(r, SkillAlreadyLoaded) for r in results) == 1
    assert m.loaded() == ["pdf"]


async def test_dispose_is_idempotent_and_ends_the_manager() -> None:
    m = await make()
    await m.load("pdf")
    await m.aclose()
    await m.aclose()
    assert m.closed and m.loaded() == []
    with pytest.raises(SkillManagerDisposed) as info:
        await m.load("pdf")
    assert info.value.code == "DISPOSED"
    model = ScriptedModel([ToolCall("c1", "load_skill", {"skill": "pdf"}), "done"])
    result = await Agent(model, middleware=[*m.middleware]).run("go")
    [message] = [x for x in result.new_messages if isinstance(x, ToolMessage)]
    assert message.text.startswith("Error (DISPOSED):")


async def test_dispose_waits_for_in_flight_skill_calls_within_its_bound() -> None:
    release = asyncio.Event()
    finished: list[str] = []

    @tool
    async def slow_tool() -> str:
        """Takes a while."""
        await release.wait()
        finished.append("slow")
        return "ok"

    m = await make(skill_tools={"pdf": [slow_tool]}, close_timeout=5)
    await m.load("pdf")
    model = ScriptedModel([ToolCall("c1", "slow_tool", {}), "done"])
    turn = asyncio.create_task(Agent(model, middleware=[*m.middleware]).run("go"))
    for _ in range(200):
        if m.record("pdf").in_flight:
            break
        await asyncio.sleep(0.01)
    disposing = asyncio.create_task(m.aclose())
    await asyncio.sleep(0.05)
    assert not disposing.done()  # waiting for the in-flight call
    release.set()
    await disposing
    assert finished == ["slow"]
    await turn

    stuck = await make(skill_tools={"pdf": [slow_tool]}, close_timeout=0.05)
    await stuck.load("pdf")
    stuck.record("pdf").enter()  # a call that never returns
    await asyncio.wait_for(stuck.aclose(), 2)  # bounded


async def test_projected_describes_this_contexts_skills_and_body_reads() -> None:
    m = await make()
    await m.load("pdf")
    seen: list[Any] = []

    @tool
    def peek(ctx: ToolContext) -> str:
        """Record the projection of this turn."""
        seen.extend(m.projected(ctx.turn))
        return "ok"

    model = ScriptedModel(
        [
            ToolCall("c1", "read_skill_body", {"handle": "pdf"}),
            ToolCall("c2", "peek", {}),
            "done",
        ]
    )
    await Agent(model, tools=[peek], middleware=[*m.middleware]).run("go")
    [projected] = seen
    assert (projected.skill, projected.tools, projected.body_reads) == ("pdf", ("pdf_extract",), 1)


async def test_load_refuses_a_skill_md_edited_since_discovery() -> None:
    # Loading the new body under the old version would make refresh flag an "update" (and
    # refresh_skills swap) a version that is already in place.
    src = MemorySource({"pdf": {"SKILL.md": skill_md("pdf", "OLD")}})
    manager = await create_skill_manager(sources=[src], gate=allow_all)
    discovered = manager.catalog()[0].version
    src.put("pdf", {"SKILL.md": skill_md("pdf", "NEW")})
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
    src = MemorySource({"pdf": {"SKILL.md": skill_md("pdf", "OLD")}})
    manager = await create_skill_manager(sources=[src], gate=allow_all)
    src.put("pdf", {"SKILL.md": skill_md("pdf", "NEW")})
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
