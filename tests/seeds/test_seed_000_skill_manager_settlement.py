"""Seed 000 (NHT ADK skills battery, "Middleware and placement"): settlement is immediate,
turn_output strips before its own next(), and auto-refresh never swaps a loaded version (while
refresh_skills does), one test per paragraph.
"""

from __future__ import annotations

import json

import pytest
from seed_000_skills import (
    BODY,
    BODY_V2,
    Capture,
    Downstream,
    exists,
    make_manager,
    pdf_source,
    result_of,
    skill_md,
    stored,
    text,
)

from plait import (
    Agent,
    DispatchContext,
    DispatchRejected,
    Middleware,
    ScriptedModel,
    ToolCall,
    ToolMessage,
)
from plait.middleware import Next
from plait.skills.managed import (
    ScriptConfig,
)

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
