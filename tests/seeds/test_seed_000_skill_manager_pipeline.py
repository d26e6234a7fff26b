"""Seed 000 (NHT ADK skills battery, "Middleware and placement"): the table of the four hooks'
responsibilities, the standalone factories and the ordering facts, one test per row or fact.

The paragraphs before the table are in test_seed_000_skill_manager.py, settlement and stripping
in test_seed_000_skill_manager_settlement.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from seed_000_skills import (
    BODY,
    BODY_V2,
    Capture,
    Downstream,
    csv_rows,
    exists,
    make_manager,
    pdf_extract,
    pdf_source,
    result_of,
    skill_md,
    text,
)

from plait import (
    Agent,
    DispatchContext,
    DispatchRejected,
    Middleware,
    ScriptedModel,
    ToolCall,
    ToolContext,
    TurnAborted,
    TurnContext,
    tool,
)
from plait.middleware import Next
from plait.skills.managed import (
    ScriptConfig,
    SkillToolCollision,
    SkillUpdateFound,
    create_skill_middleware_set,
    skills_dispatch_input_middleware,
    skills_dispatch_output_middleware,
    skills_turn_input_middleware,
    skills_turn_output_middleware,
)
from plait.skills.managed.hooks import (
    SkillsTurnOutput,
)
from plait.skills.managed.records import placeholder
from plait.skills.managed.tools import LIFECYCLE_TOOL_NAMES

# --- table: four responsibilities -----------------------------------------------------------


async def test_turn_input_hydrates_tools_and_retrievables_and_auto_refresh_refreshes_only() -> None:
    source = pdf_source()
    manager = await make_manager(source, auto_refresh=True)
    await manager.load("pdf")
    capture = Capture()
    model = ScriptedModel(["a", "b"])
    agent = Agent(model, middleware=[*manager.middleware, capture])
    await agent.run("one", thread_id="t")
    assert "pdf_extract" in capture.names[0]
    assert "read_skill_body" in text(model.requests[0].messages)  # the handle note, ephemeral
    old_version = manager.catalog()[0].version

    source.put("pdf", {"SKILL.md": skill_md("pdf", BODY_V2)})
    result = await agent.run("two", thread_id="t")
    [entry] = manager.catalog()
    assert entry.version != old_version and entry.update_available
    assert entry.loaded_version == old_version  # refreshed the catalog, swapped nothing
    assert any(isinstance(e, SkillUpdateFound) for e in result.events)


async def test_dispatch_input_removes_unloaded_tools_and_reasserts_after_mid_turn_load() -> None:
    source = pdf_source()
    source.put("csv", {"SKILL.md": skill_md("csv", "CSV body.")})
    manager = await make_manager(source, skill_tools={"pdf": [pdf_extract], "csv": [csv_rows]})
    await manager.load("csv")

    @tool
    async def admin_load() -> str:
        """Load pdf from application code, without a context."""
        await manager.load("pdf")
        return "ok"

    stale: list[Any] = []

    @tool
    async def admin_unload(ctx: ToolContext) -> str:
        """Unload pdf, then re-register a stale handle of its tool."""
        stale.append(ctx.turn.registry.get("pdf_extract"))
        await manager.unload("pdf")
        ctx.turn.registry.register(stale[0])
        return "ok"

    model = ScriptedModel(
        [
            ToolCall("c1", "admin_load", {}),
            ToolCall("c2", "pdf_extract", {"path": "a"}),
            ToolCall("c3", "admin_unload", {}),
            "done",
        ]
    )
    agent = Agent(model, tools=[admin_load, admin_unload], middleware=[*manager.middleware])
    result = await agent.run("go")
    advertised = [{t.name for t in r.tools} for r in model.requests]
    assert "pdf_extract" not in advertised[0]
    assert "pdf_extract" in advertised[1]  # re-asserted by dispatch_input after the load
    assert result_of(result.new_messages, "c2").data == "text of a"
    assert stale[0] is not None
    assert "pdf_extract" not in advertised[3]  # the stale handle was removed again
    assert "csv_rows" in advertised[3]
    assert "read_skill_body" in advertised[3]  # generic readers are not pruned


async def test_dispatch_output_reconciles_and_observes_but_is_not_a_commit_point() -> None:
    manager = await make_manager()
    before_commit: list[tuple[list[str], bool]] = []

    class BeforeSkillsDispatchOutput(Middleware):
        async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
            before_commit.append((manager.loaded(), "pdf_extract" in ctx.registry))
            await next()

    s = manager.middleware
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "load_skill", {"skill": "pdf"}),
                ToolCall("c2", "read_skill_body", {"handle": "pdf"}),
            ],
            "done",
        ]
    )
    middleware = [s.turn_input, s.dispatch_input, BeforeSkillsDispatchOutput(), s.dispatch_output]
    result = await Agent(model, middleware=[*middleware, s.turn_output]).run("go")
    assert before_commit[0] == (["pdf"], True)  # settled before dispatch_output ran
    assert result_of(result.new_messages, "c2").data == placeholder("pdf")  # observed: scrubbed
    assert BODY in text(model.requests[1].messages)


async def test_turn_output_strips_at_the_head_before_downstream_output_middleware() -> None:
    manager = await make_manager(default_channel="inline")
    downstream = Downstream()
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "load_skill", {"skill": "pdf"}),
                ToolCall("c2", "read_skill_body", {"handle": "pdf"}),
            ],
            "done",
        ]
    )
    await Agent(model, middleware=[*manager.middleware, downstream]).run("go")
    assert BODY in text(model.requests[1].messages)  # inline body and the read, during the turn
    assert BODY not in downstream.seen[0]
    assert "pdf_extract" not in downstream.names[0]


# --- standalone factories --------------------------------------------------------------------


async def test_standalone_factories_compose_through_shared_projection_state() -> None:
    manager = await make_manager()
    downstream = Downstream()
    other_set = create_skill_middleware_set(manager)
    hooks = [
        skills_turn_input_middleware(manager),
        skills_dispatch_input_middleware(manager),
        skills_dispatch_output_middleware(manager),
        other_set.turn_output,  # a different object than the one that projected
        downstream,
    ]
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "load_skill", {"skill": "pdf"}),
                ToolCall("c2", "read_skill_body", {"handle": "pdf"}),
            ],
            "one",
            ToolCall("c3", "pdf_extract", {"path": "b"}),
            "two",
        ]
    )
    agent = Agent(model, middleware=hooks)
    await agent.run("a", thread_id="t")
    r2 = await agent.run("b", thread_id="t")
    assert result_of(r2.new_messages, "c3").data == "text of b"
    assert all(BODY not in seen for seen in downstream.seen)
    assert all("pdf_extract" not in names for names in downstream.names)
    assert isinstance(skills_turn_output_middleware(manager), SkillsTurnOutput)


# --- ordering facts --------------------------------------------------------------------------


async def test_turn_registry_exists_before_turn_input_so_projection_is_sound() -> None:
    manager = await make_manager()
    await manager.load("pdf")
    before, after = Capture(), Capture()
    s = manager.middleware
    agent = Agent(ScriptedModel(["ok"]), middleware=[before, s.turn_input, after])
    await agent.run("go")
    assert before.turns[0].registry is after.turns[0].registry
    assert set(LIFECYCLE_TOOL_NAMES) <= before.names[0]
    assert "pdf_extract" not in before.names[0]
    assert "pdf_extract" in after.names[0]


async def test_turn_level_projection_failure_aborts_the_turn() -> None:
    manager = await make_manager()
    await manager.load("pdf")

    @tool
    def impostor() -> str:
        """Not the skill's tool."""
        return "impostor"

    class Squatter(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            ctx.registry.register(type(impostor)(impostor.fn, name="pdf_extract"))
            await next()

    model = ScriptedModel(["never"])
    agent = Agent(model, middleware=[Squatter(), *manager.middleware])
    with pytest.raises(TurnAborted) as info:
        await agent.run("go")
    assert isinstance(info.value.error, SkillToolCollision)
    assert model.requests == []


async def test_dispatch_integrity_failure_nacks_the_dispatch() -> None:
    manager = await make_manager()
    await manager.load("pdf")

    @tool
    def hijack(ctx: ToolContext) -> str:
        """Replace the skill's tool with a foreign one of the same name."""
        ctx.turn.registry.register(
            type(pdf_extract)(lambda path: "forged", name="pdf_extract"), replace=True
        )
        return "done"

    model = ScriptedModel([ToolCall("c1", "hijack", {}), "never"])
    agent = Agent(model, tools=[hijack], middleware=[*manager.middleware])
    with pytest.raises(DispatchRejected) as info:
        await agent.run("go")
    assert isinstance(info.value.error, SkillToolCollision)
    assert info.value.dispatch_index == 0  # caught at dispatch_output, before dispatch 1
    assert len(model.requests) == 1


async def test_dispose_cleans_up_after_an_aborted_turn_without_middleware() -> None:
    source = pdf_source(**{"scripts/hello.py": "print('hello')\n"})
    manager = await make_manager(source, scripts=ScriptConfig(timeout=5))
    await manager.load("pdf")
    workspace = manager.record("pdf").workspace
    assert workspace is not None and exists(workspace.root)
    capture = Capture()

    class Abort(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            ctx.abort(RuntimeError("stop"))

    s = manager.middleware
    agent = Agent(
        ScriptedModel(["never"]), middleware=[s.turn_input, capture, Abort(), s.turn_output]
    )
    with pytest.raises(TurnAborted):
        await agent.run("go")
    ctx = capture.turns[0]
    assert "run_pdf_hello" in ctx.registry and ctx.ephemeral  # turn_output never ran
    await manager.aclose()
    assert manager.projected(ctx) == []
    assert not {"pdf_extract", "run_pdf_hello"} & {t.name for t in ctx.registry}
    assert ctx.ephemeral == []
    assert workspace.disposed and not exists(workspace.root)
