"""TraceRecorder: what a turn writes to the trace store, and what it never writes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from plait import Agent, ScriptedModel, ToolCall
from plait.errors import ProviderError
from plait.models.base import ModelRequest, ModelResponse
from plait.models.scripted import FunctionModel
from plait.runtime.events import ErrorOccurred
from plait.skills import MemorySource
from plait.skills.managed import allow_all, create_skill_manager
from plait.tools import tool
from plait.trace import SQLiteTraceStore, TraceRecorder, TraceStoreError, call_view, run_view
from plait.trace.rows import replay

SKILL = "---\nname: secret\ndescription: Holds a secret. Use for secrets.\n---\nBODY-7f3a9c\n"


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


async def test_a_long_thread_stores_each_message_once_and_requests_as_deltas(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.sqlite3"
    store = SQLiteTraceStore(path)
    agent = Agent(
        FunctionModel(lambda r: ModelResponse(content=f"answer {len(r.messages)}")),
        middleware=[recorder := TraceRecorder(store)],
    )
    turns = 120
    for i in range(turns):
        await agent.run(f"question {i}", thread_id="long")
    await recorder.aclose()  # waits for the writes still in flight
    # 2 messages per turn, each stored once: not 120 copies of a growing history.
    assert _rows(path, "SELECT count(*) FROM trace_messages") == [(2 * turns - 1,)]
    added = _rows(path, "SELECT full, length(added) FROM trace_requests ORDER BY seq")
    assert len(added) == turns
    deltas = [int(str(size)) for full, size in added if not full]
    assert len(deltas) == turns - 3  # whole rows at seq 0, 50, 100 only
    assert max(deltas) < 200  # a delta names the two new messages, whatever the history


async def test_replaying_deltas_rebuilds_every_request(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    model = FunctionModel(lambda r: ModelResponse(content="ok"))
    agent = Agent(model, middleware=[recorder := TraceRecorder(store)])
    sent: list[int] = []
    for i in range(60):
        result = await agent.run(f"q{i}", thread_id="t")
        sent.append(len(result.new_messages))
    await recorder.drain()
    runs = await store.runs()
    last = await run_view(store, runs[0]["id"])
    assert last is not None
    span = last["dispatches"][0]["spans"][0]
    view = await call_view(store, span["id"])
    assert view is not None
    texts = [m["body"]["content"][0]["text"] for m in view["messages"]]
    assert texts[-1] == "q59" and texts[0] == "q0" and len(texts) == 119
    await store.aclose()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ([], ["a", "b"]),
        (["a", "b"], ["a", "b", "c"]),
        (["a", "b", "c", "d"], ["a", "s", "d", "e"]),
        (["a", "b"], ["b"]),
    ],
)
def test_replay_table(old: list[str], new: list[str]) -> None:
    from plait.trace.requests import delta as _delta

    row = _delta("s", "t", 1, old, new, ["h", "h", "h"])
    assert replay(old, row) == new


async def test_skill_bodies_are_recorded_by_reference_only(tmp_path: Path) -> None:
    path = tmp_path / "traces.sqlite3"
    store = SQLiteTraceStore(path)
    manager = await create_skill_manager(
        sources=[MemorySource({"secret": {"SKILL.md": SKILL}})], gate=allow_all
    )
    agent = Agent(
        ScriptedModel([ToolCall("c1", "load_skill", {"skill": "secret"}), "done"]),
        middleware=[recorder := TraceRecorder(store), *manager.middleware],
    )
    await agent.run("load it", thread_id="t")
    await recorder.drain()
    await manager.aclose()
    await store.aclose()
    assert b"BODY-7f3a9c" not in path.read_bytes()
    projected = _rows(path, "SELECT role, body FROM trace_messages WHERE kind = 'projected'")
    assert projected and all(body is None for _, body in projected)


async def test_a_failed_model_call_marks_the_run_as_an_error(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "t.sqlite3")

    def fail(request: ModelRequest) -> ModelResponse:
        raise ProviderError("provider down", provider="x")

    recorder = TraceRecorder(store)
    agent = Agent(FunctionModel(fail), middleware=[recorder])
    with pytest.raises(ProviderError):
        await agent.run("hi", thread_id="t")
    await recorder.drain()  # a failed turn's trace is written in the background
    (run,) = await store.runs()
    assert run["status"] == "error" and "provider down" in run["error"]
    view = await run_view(store, run["id"])
    assert view is not None
    (model_span,) = [s for d in view["dispatches"] for s in d["spans"] if s["kind"] == "model"]
    assert "provider down" in model_span["data"]["error"]
    await store.aclose()


async def test_tool_spans_keep_arguments_preview_and_full_text(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    long = "x" * 5_000
    agent = Agent(
        ScriptedModel([ToolCall("c1", "echo", {"text": long}), ToolCall("c2", "nope", {}), "ok"]),
        tools=[echo],
        middleware=[recorder := TraceRecorder(store, preview_chars=100)],
    )
    await agent.run("go", thread_id="t")
    await recorder.drain()
    (run,) = await store.runs()
    view = await run_view(store, run["id"])
    assert view is not None
    tools = [s for d in view["dispatches"] for s in d["spans"] if s["kind"] == "tool"]
    assert [t["name"] for t in tools] == ["echo", "nope"]
    echoed, unknown = tools
    assert echoed["data"]["chars"] == 5_000 and len(echoed["data"]["preview"]) < 200
    assert await store.blob(echoed["data"]["full"]) == long
    assert unknown["data"]["is_error"] is True
    await store.aclose()


async def test_a_trace_store_that_cannot_be_written_never_fails_the_turn(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = SQLiteTraceStore(blocker / "traces.sqlite3")
    recorder = TraceRecorder(store)
    agent = Agent(ScriptedModel(["fine", "still fine"]), middleware=[recorder])
    first = await agent.run("hi", thread_id="t")
    assert first.output == "fine"
    await recorder.drain()
    failure = recorder.write_error
    assert isinstance(failure, TraceStoreError)
    # The first turn's write landed after it ended: the next turn reports it, once.
    second = await agent.run("again", thread_id="t")
    assert second.output == "still fine"
    errors = [e for e in second.events if isinstance(e, ErrorOccurred) and e.where == "trace"]
    assert len(errors) == 1 and not errors[0].fatal and errors[0].error is failure


async def test_background_false_completes_the_trace_before_run_returns(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    recorder = TraceRecorder(store, background=False)
    agent = Agent(ScriptedModel(["fine"]), middleware=[recorder])
    await agent.run("hi", thread_id="t")
    (run,) = await store.runs()  # no drain: the turn waited for its write
    assert (run["input"], run["status"], run["output"]) == ("hi", "ok", "fine")
    await recorder.aclose()


async def test_background_false_reports_a_failed_write_in_the_same_turn(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    recorder = TraceRecorder(SQLiteTraceStore(blocker / "t.sqlite3"), background=False)
    result = await Agent(ScriptedModel(["fine"]), middleware=[recorder]).run("hi")
    errors = [e for e in result.events if isinstance(e, ErrorOccurred) and e.where == "trace"]
    assert result.output == "fine" and len(errors) == 1
    assert errors[0].error is recorder.write_error


async def test_reasoning_tokens_are_recorded_and_summed(tmp_path: Path) -> None:
    from plait.messages import Usage

    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    usage = Usage(input_tokens=50, output_tokens=40, reasoning_tokens=32, requests=1)
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[ToolCall("c1", "echo", {"text": "a"})], usage=usage),
            ModelResponse(content="done", usage=usage),
        ]
    )
    recorder = TraceRecorder(store)
    await Agent(model, tools=[echo], middleware=[recorder]).run("think", thread_id="t")
    await recorder.drain()
    (run,) = await store.runs()
    view = await run_view(store, run["id"])
    assert view is not None
    assert [d["usage"]["reasoning"] for d in view["dispatches"]] == [32, 32]
    assert view["usage"]["reasoning"] == 64 and view["usage"]["output"] == 80
    await recorder.aclose()


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_a_structured_answer_is_recorded_as_its_json(tmp_path: Path, mode: str) -> None:
    from pydantic import BaseModel

    class Verdict(BaseModel):
        ok: bool
        why: str

    answer: dict[str, object] = {"ok": True, "why": "fine"}
    entry = json.dumps(answer) if mode == "native" else ToolCall("c1", "final_result", answer)
    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    recorder = TraceRecorder(store)
    agent = Agent(
        ScriptedModel([entry]),
        output_type=Verdict,
        output_mode=mode,  # type: ignore[arg-type]
        middleware=[recorder],
    )
    assert (await agent.run("judge", thread_id="t")).output == Verdict(ok=True, why="fine")
    await recorder.drain()
    (run,) = await store.runs()
    assert json.loads(run["output"]) == answer
    await recorder.aclose()
