"""``CacheWatch``: a ``CacheBroken`` event when a request's prefix differs from the thread's
previous answered request (a summarization firing, a managed skill loaded or unloaded, a tool
added or removed, a cached result evicted by an overflow retry), none on a plain next turn or
for a refused request; tool order stable; the least recently used thread forgotten first."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from plait import Agent, ContextOverflowError, FunctionModel, ModelRequest
from plait.backends import MemoryBackend
from plait.context import (
    ContextOverflowRecovered,
    OverflowRecoveryMiddleware,
    SummarizationMiddleware,
    TokenAccountant,
)
from plait.messages import ToolCall, ToolMessage, UserMessage
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


@tool
def third(key: str) -> str:
    """A third tool."""
    return key


async def test_a_tool_added_removed_or_moved_is_named_in_the_tools() -> None:
    model = ScriptedModel(["a", "b", "c", "d", "e"])
    agent = Agent(model, tools=[lookup, other], middleware=[CacheWatch()], system_prompt="S.")
    await agent.run("first", thread_id="k")
    changes: list[Callable[[], None]] = [
        lambda: agent.tools.append(third),  # meets the old system block at block 2
        lambda: agent.tools.remove(third),
        lambda: agent.tools.remove(lookup),
        lambda: agent.tools.insert(0, lookup),  # back in front of "other"
    ]
    reports: list[list[tuple[str, int, str, int, int]]] = []
    for change in changes:
        change()
        result = await agent.run("next", thread_id="k")
        reports.append(
            [(b.where, b.index, b.reason, b.block, b.blocks) for b in _broken(result.events)]
        )

    # blocks: what the previous request held (its tools, system, its 1, 3, 5, 7 messages) from
    # the break on
    assert reports == [
        [("tools", 2, "tools changed", 2, 2 + 1 + 1 - 2)],
        [("tools", 2, "tools changed", 2, 3 + 1 + 3 - 2)],
        [("tools", 0, "tools changed", 0, 2 + 1 + 5)],
        [("tools", 0, "tools changed", 0, 1 + 1 + 7)],
    ]
    model.assert_complete()


async def test_only_the_least_recently_used_thread_is_forgotten() -> None:
    model = ScriptedModel(["x"] * 6)
    agent = Agent(model, middleware=[CacheWatch(max_threads=2)], system_prompt="Version 1.")
    for thread in ("a", "b", "a", "c"):  # "a" used again after "b": "b" is dropped for "c"
        await agent.run("hi", thread_id=thread)
    agent.system_prompt = "Version 2."
    reported = {}
    for thread in ("a", "b"):
        result = await agent.run("again", thread_id=thread)
        reported[thread] = [b.reason for b in _broken(result.events)]

    assert reported == {"a": ["system prompt changed"], "b": []}
    model.assert_complete()


LIMIT = 3_000  # the windowed model's context, in estimated tokens


@tool
def read_log(lines: int) -> str:
    """Read so many lines of the log."""
    return "log line\n" * lines


def windowed() -> FunctionModel:
    """Refuses a request above ``LIMIT`` tokens; calls ``read_log`` when asked to read."""

    def answer(request: ModelRequest) -> str | ToolCall:
        if TokenAccountant().request(request.messages, anchor_from=len(request.messages)) > LIMIT:
            raise ContextOverflowError("prompt is too long", provider="fake", status=400)
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("read "):
            lines = int(last.text.split()[1])
            return ToolCall(f"c{len(request.messages)}", "read_log", {"lines": lines})
        return "done"

    return FunctionModel(answer)


def overflow_agent(model: FunctionModel, *, backend: bool = True) -> Agent:
    """Overflow recovery that evicts (to a backend) or cuts (without one); keep_messages above
    these threads' length, so it never summarizes."""
    recovery = OverflowRecoveryMiddleware(
        backend=MemoryBackend() if backend else None, max_input_tokens=LIMIT, keep_messages=20
    )
    return Agent(model, tools=[read_log], middleware=[recovery, CacheWatch()], system_prompt="S.")


@pytest.mark.parametrize("backend", [True, False], ids=["evicted", "cut"])
async def test_a_cached_result_evicted_on_overflow_is_named_in_that_dispatch(
    backend: bool,
) -> None:
    model = windowed()
    agent = overflow_agent(model, backend=backend)
    first = await agent.run("read 800", thread_id="e")  # cached by the next request
    result = await agent.run("read 600", thread_id="e")  # overflows: the 800 lines are evicted
    later = await agent.run("thanks", thread_id="e")

    assert [e for e in result.events if isinstance(e, ContextOverflowRecovered)]
    evicted = first.new_messages[2]
    assert isinstance(evicted, ToolMessage) and evicted.data == "log line\n" * 800
    [report] = _broken(result.events)
    assert (report.dispatch, report.where, report.reason) == (1, "messages", "evicted result")
    assert (report.index, report.message_id) == (2, evicted.id)
    assert _broken([*first.events, *later.events]) == []


async def test_the_newest_result_evicted_on_overflow_breaks_nothing() -> None:
    model = windowed()
    agent = overflow_agent(model)
    events: list[object] = []
    for text in ("read 4000", "thanks"):  # the overflowing result was never cached
        result = await agent.run(text, thread_id="n")
        events.extend(result.events)

    assert [e for e in events if isinstance(e, ContextOverflowRecovered)]
    assert _broken(events) == []


async def test_a_break_reported_before_an_overflow_retry_is_not_reported_again() -> None:
    model = windowed()
    agent = overflow_agent(model)
    await agent.run("read 800", thread_id="r")
    agent.system_prompt = "Version 2."
    # The turn's first request overflows; its compacted retry still differs at the system block.
    result = await agent.run("word " * 1_200, thread_id="r")

    assert [e for e in result.events if isinstance(e, ContextOverflowRecovered)]
    assert [(b.dispatch, b.reason) for b in _broken(result.events)] == [
        (0, "system prompt changed")
    ]
