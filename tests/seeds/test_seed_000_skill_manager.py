"""Seed 000 (NHT ADK skills battery, "Middleware and placement"): one test per paragraph.

Each test is named after the paragraph (or table row) it checks. More detailed behaviour of the
managed mode lives in tests/skills/test_skills_managed_*.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from plait import (
    Agent,
    DispatchContext,
    DispatchRejected,
    Middleware,
    ScriptedModel,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnAborted,
    TurnContext,
    tool,
)
from plait.messages import Message, dump_messages
from plait.middleware import SEAMS, Next
from plait.skills import MemorySource
from plait.skills.managed import (
    ScriptConfig,
    SkillManager,
    SkillToolCollision,
    SkillUpdateFound,
    allow_all,
    create_skill_manager,
    create_skill_middleware_set,
    skills_dispatch_input_middleware,
    skills_dispatch_output_middleware,
    skills_turn_input_middleware,
    skills_turn_output_middleware,
)
from plait.skills.managed.hooks import (
    SkillsDispatchInput,
    SkillsDispatchOutput,
    SkillsTurnInput,
    SkillsTurnOutput,
)
from plait.skills.managed.records import placeholder
from plait.skills.managed.tools import LIFECYCLE_TOOL_NAMES

BODY = "PDF-BODY-7f3a: extract the text with pdf_extract, then summarise it."
BODY_V2 = "PDF-BODY-V2-91c: a newer way to extract text."


def skill_md(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: Work with {name} files. Use for {name}.\n---\n{body}\n"


@tool
def pdf_extract(path: str) -> str:
    """Extract the text of a PDF."""
    return f"text of {path}"


@tool
def csv_rows(path: str) -> int:
    """Count the rows of a CSV file."""
    return 3


def pdf_source(body: str = BODY, **files: str) -> MemorySource:
    return MemorySource({"pdf": {"SKILL.md": skill_md("pdf", body), **files}})


async def make_manager(source: MemorySource | None = None, **options: Any) -> SkillManager:
    options.setdefault("gate", allow_all)
    options.setdefault("skill_tools", {"pdf": [pdf_extract]})
    return await create_skill_manager(sources=[source or pdf_source()], **options)


def text(messages: Sequence[Message]) -> str:
    return dump_messages(messages)


async def stored(agent: Agent, thread_id: str) -> str:
    return text((await agent.store.load(thread_id)).messages)


def exists(path: Path) -> bool:
    return path.exists()


def result_of(messages: list[Message], call_id: str) -> ToolMessage:
    found = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    assert found, f"no result for {call_id}"
    return found[0]


class Capture(Middleware):
    """Records the contexts it sees in ``turn_input`` (and nothing else)."""

    def __init__(self) -> None:
        self.turns: list[TurnContext] = []
        self.names: list[set[str]] = []

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        self.turns.append(ctx)
        self.names.append({t.name for t in ctx.registry})
        await next()


class Downstream(Middleware):
    """A turn_output middleware (observation or secondary persistence) placed after the set."""

    def __init__(self) -> None:
        self.names: list[set[str]] = []
        self.seen: list[str] = []

    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        self.names.append({t.name for t in ctx.registry})
        self.seen.append(text([*ctx.messages, *ctx.ephemeral]))
        await next()


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


# --- settlement is immediate ----------------------------------------------------------------


async def test_mid_turn_load_is_not_in_the_payload_being_built_but_resolves_later() -> None:
    manager = await make_manager()
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "load_skill", {"skill": "pdf"}),
                ToolCall("c2", "pdf_extract", {"path": "a"}),
            ],
            "done",
        ]
    )
    result = await Agent(model, middleware=[*manager.middleware]).run("go")
    assert "pdf_extract" not in {t.name for t in model.requests[0].tools}
    assert result_of(result.new_messages, "c2").data == "text of a"
    assert "pdf_extract" in {t.name for t in model.requests[1].tools}


async def test_mid_turn_unload_unregisters_at_once_and_a_later_call_fails_resolution() -> None:
    manager = await make_manager()
    await manager.load("pdf")
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "unload_skill", {"skill": "pdf"}),
                ToolCall("c2", "pdf_extract", {"path": "a"}),
            ],
            "done",
        ]
    )
    result = await Agent(model, middleware=[*manager.middleware]).run("go")
    assert "pdf_extract" in {t.name for t in model.requests[0].tools}  # it was advertised
    failed = result_of(result.new_messages, "c2")
    assert failed.is_error
    assert failed.text.startswith("Unknown tool 'pdf_extract'. Available tools: ")
    assert manager.loaded() == []


# --- turnOutput strips before its own next() --------------------------------------------------


async def test_strip_before_next_is_the_guarantee_downstream_never_sees_the_body() -> None:
    manager = await make_manager()
    await manager.load("pdf")
    early, late = Downstream(), Downstream()
    model = ScriptedModel([ToolCall("c1", "read_skill_body", {"handle": "pdf"}), "done"])
    s = manager.middleware
    agent = Agent(model, middleware=[s.turn_input, s.dispatch_input, s.dispatch_output, early])
    agent.middleware.use(s.turn_output).use(late)
    await agent.run("go")
    assert BODY in early.seen[0] and "pdf_extract" in early.names[0]  # placed wrongly: leak
    assert BODY not in late.seen[0] and "pdf_extract" not in late.names[0]


async def test_thread_store_never_contains_a_skill_body() -> None:
    for channel in ("handle", "inline"):
        manager = await make_manager(default_channel=channel)
        model = ScriptedModel(
            [
                ToolCall("c1", "load_skill", {"skill": "pdf"}),
                ToolCall("c2", "read_skill_body", {"handle": "pdf"}),
                "one",
                ToolCall("c3", "read_skill_body", {"handle": "pdf"}),
                ToolCall("c4", "unload_skill", {"skill": "pdf"}),
                "two",
            ]
        )
        agent = Agent(model, middleware=[*manager.middleware])
        r1 = await agent.run("a", thread_id="t")
        r2 = await agent.run("b", thread_id="t")
        assert BODY in text(model.requests[2].messages)  # the model did read it
        assert BODY not in await stored(agent, "t")
        assert BODY not in text(r1.new_messages + r2.new_messages)
        snapshot = await agent.store.load("t")
        calls = {c.id for m in snapshot.messages for c in getattr(m, "tool_calls", [])}
        results = {m.tool_call_id for m in snapshot.messages if isinstance(m, ToolMessage)}
        assert calls == results  # placeholders keep every call/result pair intact


async def test_failed_turn_is_best_effort_and_the_next_turn_rehydrates() -> None:
    manager = await make_manager()
    await manager.load("pdf")

    class FailAfterRead(Middleware):
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            if ctx.index == 1:
                raise RuntimeError("provider down")
            await next()

    model = ScriptedModel(
        [
            ToolCall("c1", "read_skill_body", {"handle": "pdf"}),
            ToolCall("c2", "pdf_extract", {"path": "b"}),
            "done",
        ]
    )
    s = manager.middleware
    agent = Agent(model, middleware=[*s, FailAfterRead()])
    with pytest.raises(DispatchRejected):
        await agent.run("a", thread_id="t")
    assert BODY not in await stored(agent, "t")
    agent.middleware = type(agent.middleware)([*s])
    result = await agent.run("b", thread_id="t")
    assert result_of(result.new_messages, "c2").data == "text of b"


async def test_workspace_lifetime_follows_the_skill_not_the_turn() -> None:
    source = pdf_source(**{"scripts/hello.py": "print('hello from the workspace')\n"})
    manager = await make_manager(source, scripts=ScriptConfig(timeout=10))
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "pdf"}),
            "one",
            ToolCall("c2", "run_pdf_hello", {}),
            "two",
        ]
    )
    agent = Agent(model, middleware=[*manager.middleware])
    await agent.run("a", thread_id="t")
    workspace = manager.record("pdf").workspace
    assert workspace is not None and exists(workspace.root)  # survived the turn
    r2 = await agent.run("b", thread_id="t")
    assert "hello from the workspace" in result_of(r2.new_messages, "c2").text
    await manager.unload("pdf")
    assert workspace.disposed and not exists(workspace.root)


# --- empty initialized set; auto-refresh never swaps; refresh_skills does -------------------


async def test_empty_initialized_set_short_circuits_the_dispatch_hooks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manager = await make_manager()
    calls: list[str] = []
    monkeypatch.setattr(manager, "reconcile", lambda ctx: calls.append("reconcile"))
    monkeypatch.setattr(manager, "observe", lambda ctx: calls.append("observe"))
    capture = Capture()
    model = ScriptedModel([ToolCall("c1", "list_skills", {}), "done"])
    await Agent(model, middleware=[*manager.middleware, capture]).run("go")
    assert calls == []
    assert manager.projected(capture.turns[0]) == []


async def test_turn_output_still_strips_residue_of_a_skill_unloaded_mid_turn() -> None:
    manager = await make_manager(default_channel="inline")
    await manager.load("pdf")
    downstream = Downstream()
    seen_live: list[str] = []

    class Live(Middleware):
        async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
            seen_live.append(text(ctx.turn.messages))
            await next()

    model = ScriptedModel(
        [
            [
                ToolCall("c1", "read_skill_body", {"handle": "pdf"}),
                ToolCall("c2", "unload_skill", {"skill": "pdf"}),
            ],
            "done",
        ]
    )
    await Agent(model, middleware=[*manager.middleware, Live(), downstream]).run("go")
    assert manager.loaded() == []
    assert BODY not in seen_live[0]  # the read that landed after the unload was replaced
    assert BODY not in downstream.seen[0]
    assert "pdf_extract" not in downstream.names[0]


async def test_auto_refresh_never_swaps_a_loaded_version() -> None:
    source = pdf_source()
    manager = await make_manager(source, auto_refresh=True)
    await manager.load("pdf")
    source.put("pdf", {"SKILL.md": skill_md("pdf", BODY_V2)})
    model = ScriptedModel([ToolCall("c1", "read_skill_body", {"handle": "pdf"}), "done"])
    await Agent(model, middleware=[*manager.middleware]).run("go")
    assert BODY in text(model.requests[1].messages)
    assert BODY_V2 not in text(model.requests[1].messages)
    assert manager.record("pdf").update_available


async def test_explicit_refresh_skills_performs_the_version_replacement() -> None:
    source = pdf_source()
    manager = await make_manager(source)
    await manager.load("pdf")
    old = manager.record("pdf").version
    source.put("pdf", {"SKILL.md": skill_md("pdf", BODY_V2)})
    model = ScriptedModel(
        [
            ToolCall("c1", "read_skill_body", {"handle": "pdf"}),
            [
                ToolCall("c2", "refresh_skills", {"skill": "pdf"}),
                ToolCall("c3", "read_skill_body", {"handle": "pdf"}),
            ],
            "done",
        ]
    )
    result = await Agent(model, middleware=[*manager.middleware]).run("go")
    refreshed = json.loads(result_of(result.new_messages, "c2").text)
    assert refreshed["refreshed"][0]["status"] == "swapped"
    assert manager.record("pdf").version != old
    live = text(model.requests[2].messages)
    assert BODY_V2 in live and BODY not in live  # the old body left with the old version
