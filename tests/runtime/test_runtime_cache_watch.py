"""``CacheWatch``: a ``CacheBroken`` event when a request's prefix differs from the thread's
previous request (a summarization firing, a managed skill loaded or unloaded), none on a plain
next turn; tool order stable."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from plait import Agent
from plait.context import SummarizationMiddleware
from plait.messages import ToolCall
from plait.models import ScriptedModel
from plait.runtime import CacheBroken, CacheWatch, ModelRequestSent
from plait.skills import FilesystemSource
from plait.skills.managed import create_skill_manager
from plait.skills.managed.tools import allow_all
from plait.tools import tool


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def other(key: str) -> str:
    """Another tool."""
    return key


def _broken(events: Sequence[object]) -> list[CacheBroken]:
    return [e for e in events if isinstance(e, CacheBroken)]


async def test_a_plain_next_turn_and_a_tool_loop_break_nothing() -> None:
    model = ScriptedModel(["one", ToolCall("c1", "lookup", {"key": "a"}), "two", "three"])
    agent = Agent(model, tools=[lookup, other], middleware=[CacheWatch()], system_prompt="S.")
    events: list[object] = []
    for text in ("first", "second", "third"):
        result = await agent.run(text, thread_id="t")
        events.extend(result.events)

    assert _broken(events) == []
    sent = [e.request for e in events if isinstance(e, ModelRequestSent)]
    assert {tuple(d.name for d in r.tools) for r in sent} == {("lookup", "other")}
    model.assert_complete()


async def test_summarization_firing_is_reported_once_where_the_summary_lands() -> None:
    model = ScriptedModel(["a", "b", "c", "d", "e"])
    agent = Agent(
        model,
        middleware=[SummarizationMiddleware(200, keep_messages=2), CacheWatch()],
    )
    reports: list[CacheBroken] = []
    for text in ("one " * 60, "two " * 60, "three " * 60, "four", "five"):
        result = await agent.run(text, thread_id="s")
        reports.extend(_broken(result.events))

    assert reports, "the summary rewrote the prefix: reported"
    first = reports[0]
    assert first.where == "messages"
    assert first.reason in ("summary", "message removed")
    assert first.blocks > 0
    # once per crossing: not on every later call of the thread
    assert len(reports) < 5
    model.assert_complete()


async def test_a_changed_system_prompt_is_named() -> None:
    model = ScriptedModel(["a", "b"])
    agent = Agent(model, middleware=[CacheWatch()], system_prompt="Version 1.")
    await agent.run("hi", thread_id="p")
    agent.system_prompt = "Version 2."
    result = await agent.run("again", thread_id="p")

    [report] = _broken(result.events)
    assert (report.where, report.reason, report.block) == ("system", "system prompt changed", 0)
    model.assert_complete()


async def test_a_managed_skill_loaded_or_unloaded_is_named_at_the_system_block(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "skills" / "ledger"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: ledger\ndescription: Keeps the ledger.\n---\n\nBalance every row.\n"
    )
    manager = await create_skill_manager(
        sources=[FilesystemSource(tmp_path / "skills")], gate=allow_all
    )
    model = ScriptedModel(["a", "b", "c", "d"])
    agent = Agent(model, middleware=[*manager.middleware, CacheWatch()], system_prompt="S.")
    reports: list[list[tuple[str, str]]] = []
    for step in range(4):
        if step == 1:
            await manager.load("ledger", channel="inline")
        if step == 3:
            await manager.unload("ledger")
        result = await agent.run(f"turn {step}", thread_id="m")
        reports.append([(b.where, b.reason) for b in _broken(result.events)])
    await manager.aclose()

    loaded = ("system", "projected system message changed")
    assert reports == [[], [loaded], [], [loaded]]
    model.assert_complete()
