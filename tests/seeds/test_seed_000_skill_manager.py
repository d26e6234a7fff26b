"""Seed 000 (NHT ADK skills battery, "Middleware and placement"): one test per paragraph.

Each test is named after the paragraph it checks: the set and its placement, initialized vs
projected, the four stages. The table of responsibilities, the factories and the ordering facts are
in test_seed_000_skill_manager_pipeline.py, settlement and stripping in
test_seed_000_skill_manager_settlement.py; shared skills and middleware in
tests/support/seed_000_skills.py. More detailed behaviour of the managed mode lives in
tests/skills/test_skills_managed_*.py.
"""

from __future__ import annotations

from typing import Any

from seed_000_skills import (
    BODY,
    Capture,
    Downstream,
    make_manager,
    result_of,
    text,
)

from plait import (
    Agent,
    DispatchContext,
    Middleware,
    ScriptedModel,
    ToolCall,
    TurnContext,
)
from plait.middleware import SEAMS, Next
from plait.skills import MemorySource
from plait.skills.managed import (
    ScriptConfig,
)
from plait.skills.managed.hooks import (
    SkillsDispatchInput,
    SkillsDispatchOutput,
    SkillsTurnInput,
    SkillsTurnOutput,
)
from plait.skills.managed.tools import LIFECYCLE_TOOL_NAMES

# --- paragraph 1: the set, placement, shape --------------------------------------------------


async def test_set_contains_four_hooks_each_placed_in_its_own_pipeline_position() -> None:
    """SkillMiddlewareSet contains turnInput, turnOutput, dispatchInput and dispatchOutput;
    each is placed on its own; scripts and auto-refresh change behaviour, not shape."""
    plain = await make_manager()
    full = await make_manager(scripts=ScriptConfig(), auto_refresh=True)
    for manager in (plain, full):
        s = manager.middleware
        for hook in ("turn_input", "dispatch_input", "dispatch_output", "turn_output"):
            middleware = getattr(s, hook)
            assert isinstance(middleware, Middleware)
            assert [h for h in SEAMS if middleware.overrides(h)] == [hook]
    assert [type(m) for m in plain.middleware] == [type(m) for m in full.middleware]

    budget_saw: list[set[str]] = []

    class Budget(Middleware):
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            budget_saw.append({t.name for t in ctx.registry})
            await next()

    s, early, downstream = plain.middleware, Capture(), Downstream()
    await plain.load("pdf")
    model = ScriptedModel([ToolCall("c1", "pdf_extract", {"path": "a"}), "done"])
    # Each hook in its own position among the application's middleware.
    placed = [s.turn_input, early, s.dispatch_input, Budget(), s.dispatch_output]
    result = await Agent(model, middleware=[*placed, s.turn_output, downstream]).run("go")
    assert result_of(result.new_messages, "c1").data == "text of a"
    assert "pdf_extract" in early.names[0]  # turn_input early: hydrated before anyone reads
    assert len(budget_saw) == 2 and all("pdf_extract" in seen for seen in budget_saw)
    assert len(downstream.names) == 1 and "pdf_extract" not in downstream.names[0]


# --- tip: projection is middleware because the registry is rebuilt every turn ----------------


async def test_projection_is_middleware_because_the_registry_is_rebuilt_every_turn() -> None:
    manager = await make_manager()
    await manager.load("pdf")
    capture = Capture()
    s = manager.middleware
    agent = Agent(ScriptedModel(["one", "two"]), middleware=[s.turn_input, capture])
    await agent.run("a", thread_id="t")
    await agent.run("b", thread_id="t")
    first, second = capture.turns
    assert first.registry is not second.registry
    assert all("pdf_extract" in names for names in capture.names)

    forgetful = Capture()
    bare = Agent(ScriptedModel(["x"]), tools=manager.tools(), middleware=[forgetful])
    await bare.run("c")
    assert "pdf_extract" not in forgetful.names[0]  # no projection hook: no lifecycle


# --- paragraph 2: skip the projection hook and it works exactly once -------------------------


async def test_loaded_skill_is_still_loaded_and_callable_in_turns_two_and_three() -> None:
    manager = await make_manager()
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "load_skill", {"skill": "pdf"}),
                ToolCall("c2", "pdf_extract", {"path": "1"}),
            ],
            "turn one",
            ToolCall("c3", "pdf_extract", {"path": "2"}),
            "turn two",
            ToolCall("c4", "pdf_extract", {"path": "3"}),
            "turn three",
        ]
    )
    agent = Agent(model, middleware=[*manager.middleware])
    r1 = await agent.run("one", thread_id="t")
    r2 = await agent.run("two", thread_id="t")
    r3 = await agent.run("three", thread_id="t")
    assert result_of(r1.new_messages, "c2").data == "text of 1"
    assert result_of(r2.new_messages, "c3").data == "text of 2"
    assert result_of(r3.new_messages, "c4").data == "text of 3"
    assert manager.loaded() == ["pdf"]
    assert "pdf_extract" in {t.name for t in model.requests[4].tools}


async def test_skipping_the_projection_hook_gives_a_battery_that_works_exactly_once() -> None:
    manager = await make_manager()
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "load_skill", {"skill": "pdf"}),
                ToolCall("c2", "pdf_extract", {"path": "1"}),
            ],
            "turn one",
            ToolCall("c3", "pdf_extract", {"path": "2"}),
            "turn two",
        ]
    )
    agent = Agent(model, tools=manager.tools())  # the manager is wired, its hooks are not
    r1 = await agent.run("one", thread_id="t")
    r2 = await agent.run("two", thread_id="t")
    assert result_of(r1.new_messages, "c2").data == "text of 1"  # loads cleanly, works once
    vanished = result_of(r2.new_messages, "c3")
    assert vanished.is_error and "Unknown tool 'pdf_extract'" in vanished.text
    assert manager.loaded() == ["pdf"]  # still initialized, just never projected again


# --- paragraph 3: initialized vs projected --------------------------------------------------


async def test_initialized_is_manager_state_projected_is_per_context() -> None:
    manager = await make_manager()
    await manager.load("pdf")  # no context: manager state only
    assert manager.loaded() == ["pdf"]
    seen: list[list[str]] = []

    class Probe(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            seen.append([p.skill for p in manager.projected(ctx)])
            await next()

    s, capture = manager.middleware, Capture()
    agent = Agent(
        ScriptedModel(["a", "b"]),
        middleware=[Probe(), s.turn_input, Probe(), capture, s.turn_output],
    )
    await agent.run("x")
    await agent.run("y")
    assert seen == [[], ["pdf"], [], ["pdf"]]  # each fresh context starts unprojected
    first, second = capture.turns
    assert first is not second
    assert manager.projected(first) == []  # stripped when its turn ended
    assert manager.loaded() == ["pdf"]  # manager state is untouched by the strip


# --- paragraph 4: four stages ----------------------------------------------------------------


async def test_four_stages_hydrate_repair_observe_and_strip() -> None:
    manager = await make_manager()
    await manager.load("pdf")
    s = manager.middleware
    log: list[tuple[str, Any]] = []

    class AfterTurnInput(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            log.append(("hydrated", "pdf_extract" in ctx.registry))
            await next()

    class Tamper(Middleware):  # something removes the skill tool mid-turn
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            if ctx.index == 1:
                tool_ = ctx.registry.get("pdf_extract")
                assert tool_ is not None
                ctx.registry.unregister(tool_)
            await next()

    class AfterDispatchInput(Middleware):
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            log.append(("repaired", "pdf_extract" in ctx.registry))
            await next()

    class AfterDispatchOutput(Middleware):
        async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
            log.append(("observed", BODY in text(ctx.new_messages)))
            await next()

    class AfterTurnOutput(Middleware):
        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            leftover = text([*ctx.messages, *ctx.ephemeral])
            log.append(("stripped", "pdf_extract" in ctx.registry or BODY in leftover))
            await next()

    model = ScriptedModel(
        [
            ToolCall("c1", "read_skill_body", {"handle": "pdf"}),
            ToolCall("c2", "pdf_extract", {"path": "a"}),
            "done",
        ]
    )
    middleware = [s.turn_input, AfterTurnInput(), Tamper(), s.dispatch_input, AfterDispatchInput()]
    middleware += [s.dispatch_output, AfterDispatchOutput(), s.turn_output, AfterTurnOutput()]
    result = await Agent(model, middleware=middleware).run("go")
    assert log == [
        ("hydrated", True),
        ("repaired", True),
        ("observed", False),
        ("repaired", True),
        ("observed", False),
        ("repaired", True),
        ("observed", False),
        ("stripped", False),
    ]
    assert result_of(result.new_messages, "c2").data == "text of a"
    assert BODY in text(model.requests[1].messages)  # the live turn had the body


# --- paragraph 5: always all four; the manager hands the set back ----------------------------


async def test_set_is_always_all_four_and_inactive_hooks_call_next_and_return() -> None:
    empty = await make_manager(MemorySource({}), skill_tools=None)
    reached: list[str] = []

    class Tail(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            reached.append("turn_input")
            await next()

        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            reached.append("dispatch_input")
            await next()

        async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
            reached.append("dispatch_output")
            await next()

        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            reached.append("turn_output")
            await next()

    assert len(list(empty.middleware)) == 4
    await Agent(ScriptedModel(["ok"]), middleware=[*empty.middleware, Tail()]).run("go")
    assert reached == ["turn_input", "dispatch_input", "dispatch_output", "turn_output"]

    # Creating a manager installs nothing: an agent without the set has no lifecycle at all.
    model = ScriptedModel(["ok"])
    await Agent(model).run("go")
    assert not {t.name for t in model.requests[0].tools} & set(LIFECYCLE_TOOL_NAMES)


# --- "Use the manager's stable middleware set" ----------------------------------------------


async def test_manager_middleware_is_a_stable_set_of_named_hooks() -> None:
    manager = await make_manager()
    s = manager.middleware
    assert manager.middleware is s
    assert isinstance(s.turn_input, SkillsTurnInput)
    assert isinstance(s.turn_output, SkillsTurnOutput)
    assert isinstance(s.dispatch_input, SkillsDispatchInput)
    assert isinstance(s.dispatch_output, SkillsDispatchOutput)
    assert list(s) == [s.turn_input, s.dispatch_input, s.dispatch_output, s.turn_output]
    await manager.load("pdf")
    model = ScriptedModel([ToolCall("c1", "pdf_extract", {"path": "a"}), "done"])
    result = await Agent(model, middleware=[*s]).run("go")
    assert result_of(result.new_messages, "c1").data == "text of a"
