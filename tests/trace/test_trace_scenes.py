"""Pauses, cache breaks and subagent runs in the trace (issues 26, 25, 28), recorded by
``trace_scenes.record_scenes`` into SQLite and into Postgres (a real server), read back through
the page's views: what waited and who decided what, when; the request whose prompt-cache prefix
broke, where and why; a child's run under the parent's tool call, with its own usage and the
tree's total."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from postgres_server import fresh_schema, postgres_url
from trace_scenes import (
    CACHED,
    EDITED_TEXT,
    FETCHER_USAGE,
    PARENT_USAGE,
    RESEARCHER_USAGE,
    TREE_INPUT,
    lookup,
    record_scenes,
    spans_of,
)

from plait import Agent, Limits, ScriptedModel, ToolCall
from plait.messages import Usage
from plait.runtime.events import SubagentEventRelayed, TurnStarted
from plait.trace import SQLiteTraceStore, TraceRecorder, TraceStore, call_view, run_view
from plait.trace.postgres import PostgresTraceStore
from plait.trace.tree import call_id_of


@pytest.fixture(params=["sqlite", "postgres"])
async def views(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Views]:
    if request.param == "sqlite":
        lite = SQLiteTraceStore(tmp_path / "traces.sqlite3")
        yield await Views.record(lite)
        await lite.aclose()
        return
    async with fresh_schema(postgres_url()) as schema:
        pg = PostgresTraceStore(postgres_url(), schema=schema)
        await pg.setup()
        yield await Views.record(pg)
        await pg.aclose()


@dataclass
class Views:
    store: TraceStore
    runs: dict[str, list[dict[str, Any]]]
    """Each thread's run views, oldest first."""

    @classmethod
    async def record(cls, store: TraceStore) -> Views:
        recorder = await record_scenes(store)
        await recorder.drain()
        assert recorder.write_error is None
        runs: dict[str, list[dict[str, Any]]] = {}
        for run in reversed(await store.runs()):
            view = await run_view(store, run["id"])
            assert view is not None
            runs.setdefault(run["thread_id"], []).append(view)
        return cls(store, runs)


def _sum(usages: list[Usage]) -> dict[str, int]:
    return {
        "input": sum(u.input_tokens for u in usages),
        "output": sum(u.output_tokens for u in usages),
        "cache_read": 0,
        "cache_write": 0,
        "reasoning": 0,
    }


async def test_a_paused_run_lists_what_waits_and_links_the_run_that_resumed_it(
    views: Views,
) -> None:
    paused, resumed = views.runs["approvals"]
    assert paused["run"]["status"] == "paused" and resumed["run"]["status"] == "ok"
    held = paused["pause"]["paused"]
    assert [(c["id"], c["name"], c["args"], c["skill"]) for c in held["pending"]] == [
        ("s1", "send", {"to": "bo"}, None),
        ("d1", "delete", {"path": "notes.txt"}, None),
        ("a1", "ask", {"question": "which day?"}, None),
    ]
    assert held["pending"][0]["reason"] == "send requires approval"
    assert held["resumed_by"]["run_id"] == resumed["run"]["id"]
    decided = resumed["pause"]["resumed"]
    assert decided["paused_run"] == paused["run"]["id"]
    assert "paused" not in resumed["pause"] and "resumed" not in paused["pause"]
    assert [(c["id"], c["name"], c["decision"]) for c in decided["calls"]] == [
        ("s1", "send", {"kind": "approve", "by": "ana", "args": {"to": "cy"}}),
        ("d1", "delete", {"kind": "reject", "by": "ana", "message": "keep the notes"}),
        ("a1", "ask", {"kind": "answer", "by": "bo"}),
    ]
    assert decided["calls"][1]["args"] == {"path": "notes.txt"}  # what was held, joined
    assert decided["resumed_at"] >= decided["paused_at"] > 0
    assert decided["waited"] == pytest.approx(decided["resumed_at"] - decided["paused_at"])
    assert resumed["run"]["input"] == (
        "resume: s1 approve (edited) by ana, d1 reject by ana, a1 answer by bo"
    )
    tools = {s["data"]["call_id"]: s["data"] for s in spans_of(resumed, "tool")}
    assert tools["s1"]["args"] == {"to": "cy"} and tools["s1"]["preview"] == "sent to cy"
    assert tools["a1"]["skipped_by"] == "answered" and tools["a1"]["preview"] == "Tuesday"


async def test_a_cache_break_is_kept_on_its_request_naming_the_message_and_cause(
    views: Views,
) -> None:
    first, second = views.runs["cached"]
    assert first["cache_breaks"] == [] and not spans_of(first, "model")[0]["data"].get(
        "cache_broken"
    )
    (model,) = spans_of(second, "model")
    broken = model["data"]["cache_broken"]
    assert (broken["where"], broken["index"], broken["reason"]) == (
        "messages",
        0,
        "message changed",
    )
    assert second["cache_breaks"] == [{"span_id": model["id"], **broken}]
    call = await call_view(views.store, model["id"])
    assert call is not None
    named = call["messages"][0]
    assert named["key"].startswith(broken["message_id"] + ":")
    assert named["body"]["content"][0]["text"] == EDITED_TEXT
    usage = model["usage"]
    assert (usage["input"], usage["cache_read"]) == (
        CACHED[1].input_tokens,
        CACHED[1].cache_read_tokens,
    )


async def test_a_subagent_run_is_recorded_under_the_tool_call_that_started_it(
    views: Views,
) -> None:
    (view,) = views.runs["tree"]
    assert view["usage"] == _sum(PARENT_USAGE)  # the run's own model calls
    researcher, fetcher = view["subagents"]
    assert (researcher["name"], researcher["thread_id"], researcher["parent_thread"]) == (
        "researcher",
        "tree/r1",
        "tree",
    )
    assert (researcher["call_id"], researcher["depth"], researcher["status"]) == ("r1", 1, "ok")
    assert researcher["output"] == "tides are high at noon"
    assert researcher["usage"] == _sum(RESEARCHER_USAGE)  # its own: the grandchild's apart
    assert [
        (s["kind"], s.get("name") if s["kind"] == "tool" else None) for s in researcher["steps"]
    ] == [
        ("model", None),
        ("tool", "lookup"),
        ("model", None),
        ("tool", "fetcher"),
        ("model", None),
    ]
    assert [s["usage"]["input"] for s in researcher["steps"] if s["kind"] == "model"] == [
        u.input_tokens for u in RESEARCHER_USAGE
    ]
    assert (fetcher["parent_thread"], fetcher["call_id"], fetcher["depth"]) == ("tree/r1", "f1", 2)
    assert fetcher["usage"] == _sum(FETCHER_USAGE)
    assert view["tree_usage"]["input"] == TREE_INPUT
    assert view["tree_model_calls"] == len(RESEARCHER_USAGE) + len(FETCHER_USAGE)
    (tool,) = spans_of(view, "tool")
    assert (
        tool["data"]["call_id"] == "r1"
        and tool["dispatch"] == spans_of(view, "subagent")[0]["dispatch"]
    )
    assert view["tool_calls"] == 1 and view["actions"] == 0  # relayed events are not actions


@dataclass(slots=True, kw_only=True)
class _WithCallId(SubagentEventRelayed):
    call_id: str


def test_a_relayed_event_names_its_call_by_call_id_when_it_has_one() -> None:
    started = TurnStarted(thread_id="t/x", input=[])
    plain = SubagentEventRelayed(name="n", depth=1, thread_id="t/c9", event=started)
    assert call_id_of(plain) == "c9"
    tagged = _WithCallId(name="n", depth=1, thread_id="t/c9", event=started, call_id="call/9")
    assert call_id_of(tagged) == "call/9"


async def test_a_failed_subagent_is_recorded_with_its_error_and_the_parent_goes_on(
    tmp_path: Path,
) -> None:
    store = SQLiteTraceStore(tmp_path / "traces.sqlite3")
    recorder = TraceRecorder(store)
    child = Agent(
        ScriptedModel([ToolCall("l1", "lookup", {"q": "x"}), "never reached"]),
        tools=[lookup],
        limits=Limits(model_calls_per_turn=1),
    )
    parent = Agent(
        ScriptedModel([ToolCall("w1", "worker", {"task": "look x up"}), "it failed"]),
        tools=[child.as_tool("worker", "Works.")],
        middleware=[recorder],
    )
    result = await parent.run("go", thread_id="p")
    assert result.output == "it failed"
    await recorder.aclose()
    (run,) = await store.runs()
    view = await run_view(store, run["id"])
    assert view is not None
    (worker,) = view["subagents"]
    assert (worker["thread_id"], worker["status"]) == ("p/w1", "error")
    assert "LimitExceeded" in worker["error"]
    assert [s["kind"] for s in worker["steps"]] == ["model", "tool"]
    (tool_span,) = spans_of(view, "tool")
    assert tool_span["data"]["is_error"] and "worker" in tool_span["data"]["preview"]
