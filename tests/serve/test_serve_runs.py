"""Finished runs past the replay window keep their view and nothing else: no events, messages
or task a garbage collection would walk; a run being streamed keeps its events."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
from collections.abc import AsyncIterator, Mapping

import httpx
import pytest

from plait import Agent, FunctionModel, ScriptedModel, ToolCall, UserMessage, tool
from plait.messages import Message
from plait.middleware.context import Event
from plait.serve import create_app, runs
from plait.serve.limits import ServeLimits
from plait.serve.runs import Run, RunManager


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def reachable(root: object, limit: int = 20_000) -> list[object]:
    """The objects ``root`` reaches (not through types or modules), at most ``limit``."""
    seen: dict[int, object] = {}
    todo = [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ == "module":
            continue
        seen[id(obj)] = obj
        todo.extend(gc.get_referents(obj))
    return list(seen.values())


async def finished(manager: RunManager, agent: Agent, thread: str, text: str) -> Run:
    run = manager.start(agent, "plait", thread, [UserMessage(text)])
    assert run.task is not None
    await run.task
    return run


async def test_a_run_past_the_replay_window_keeps_its_view_and_no_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runs, "REPLAYS_KEPT", 2)
    agent = Agent(ScriptedModel(["one", "two", "three"]))
    manager = RunManager(ServeLimits())
    first = await finished(manager, agent, "t1", "a")
    view = first.view()
    whole = first.result
    assert first.events and not first.compacted and whole is not None
    second = await finished(manager, agent, "t2", "b")
    assert not first.compacted  # still among the newest two to finish
    third = await finished(manager, agent, "t3", "c")
    assert first.compacted and not second.compacted and not third.compacted
    assert first.view() == view and view["output"] == "one" and view["status"] == "success"
    assert first.events == [] and first.task is None and first.result is None
    assert whole.new_messages and whole.output == "one"  # a caller's result stays whole
    assert [e async for e in first.stream()] == []
    held = reachable(first)
    assert not [o for o in held if isinstance(o, Message | Event)], "messages or events kept"
    # What a full garbage collection walks for it: the run, and what every compacted run
    # shares (its empty events, its ended asyncio.Event and that event's waiters).
    shared = {id(runs._NO_EVENTS), id(runs._ENDED), id(runs._ENDED._waiters)}
    tracked = [o for o in held if gc.is_tracked(o) and id(o) not in shared]
    assert len(tracked) <= 1, [type(o).__name__ for o in tracked]
    assert manager.get(first.run_id) is first  # still remembered: GET .../runs/{id} answers


async def test_a_run_being_streamed_keeps_its_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "REPLAYS_KEPT", 1)
    agent = Agent(ScriptedModel(["one", "two"]))
    manager = RunManager(ServeLimits())
    first = await finished(manager, agent, "t1", "a")
    reader = first.stream()
    event = await anext(reader)  # a slow client: one event read, the rest to come
    await finished(manager, agent, "t2", "b")
    assert not first.compacted and first.events
    kept = list(first.events)
    rest = [e async for e in reader]
    assert [event, *rest] == kept
    assert first.holds == 0 and first.compacted  # compacted as the reader let go


async def test_a_failed_run_keeps_its_error_in_its_view(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "REPLAYS_KEPT", 1)
    agent = Agent(ScriptedModel([]))  # no answer scripted: the turn fails
    manager = RunManager(ServeLimits())
    failed = await finished(manager, agent, "t1", "a")
    view = failed.view()
    assert view["status"] == "error" and view["error"]["message"]
    await finished(manager, Agent(ScriptedModel(["ok"])), "t2", "b")
    assert failed.compacted and failed.view() == view
    assert failed.error is None  # the error's traceback went with it


async def test_streaming_a_compacted_run_sends_its_final_run_event_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runs, "REPLAYS_KEPT", 1)
    model = ScriptedModel([ToolCall("c1", "add", {"a": 1, "b": 2}), "sum: 3", "again"])
    agent = Agent(model, tools=[add])
    transport = httpx.ASGITransport(app=create_app(agent))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        first = (await client.post("/threads/r/runs", json={"input": "add"})).json()["run_id"]
        done = (await client.get(f"/threads/r/runs/{first}/wait")).json()
        replay = (await client.get(f"/threads/r/runs/{first}/stream")).text
        assert "event: tool_call_finished" in replay  # the newest: replayed whole
        second = (await client.post("/threads/r/runs", json={"input": "more"})).json()["run_id"]
        await client.get(f"/threads/r/runs/{second}/wait")
        late = (await client.get(f"/threads/r/runs/{first}/stream")).text
        assert (await client.get(f"/threads/r/runs/{first}")).json() == done
    frames = [f for f in late.split("\n\n") if f.strip()]
    assert len(frames) == 1 and frames[0].startswith("event: run\n")
    assert json.loads(frames[0].split("data: ", 1)[1]) == done


class SlowBoard:
    """A run board whose writes take ``delay`` seconds (a worker whose pool is busy)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.views: dict[str, dict[str, object]] = {}
        self.writes: list[str] = []
        """The status of each view written, in order."""

    async def publish(self, view: dict[str, object], *, ended: bool = False) -> None:
        await asyncio.sleep(self.delay)
        self.views[str(view["run_id"])] = view
        self.writes.append(str(view["status"]))

    async def cancel_requests(self, run_ids: list[str]) -> list[str]:
        return []


async def test_published_returns_once_the_run_is_on_the_board() -> None:
    board = SlowBoard(0.2)
    gate = asyncio.Event()

    async def answer(request: object) -> str:
        await gate.wait()
        return "done"

    manager = RunManager(ServeLimits(), board=board)  # type: ignore[arg-type]
    run = manager.start(Agent(FunctionModel(answer)), "plait", "t", [UserMessage("hi")])
    assert run.run_id not in board.views  # a fresh run: its view is still being written
    await manager.published(run)
    assert board.views[run.run_id]["run_id"] == run.run_id  # what the 202 may now name
    gate.set()
    assert run.task is not None
    await run.task
    await manager.published(run)
    assert board.views[run.run_id]["status"] == "success"


async def test_a_run_not_announced_goes_on_the_board_once_and_published_ended_waits_for_it() -> (
    None
):
    board = SlowBoard(0.2)
    manager = RunManager(ServeLimits(), board=board)  # type: ignore[arg-type]
    run = manager.start(
        Agent(ScriptedModel(["done"])), "plait", "t", [UserMessage("hi")], announce=False
    )
    await run.ended()
    await manager.published(run, ended=True)  # the write queued as the task finished
    assert board.writes == ["success"]  # no write as it started
    announced = manager.start(Agent(ScriptedModel(["again"])), "plait", "u", [UserMessage("hi")])
    await manager.published(announced, ended=True)
    assert len(board.writes) == 3 and board.writes[-1] == "success"  # as it started and ended


async def test_a_run_compacted_as_it_ends_still_answers_its_request_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its request holds the run: under load, REPLAYS_KEPT runs can finish between a run's end
    and its handler reading the answer (the bench saw 111 of 1,000 answers come back empty);
    with no replay window at all every run is compacted as it ends, unless held."""
    monkeypatch.setattr(runs, "REPLAYS_KEPT", 0)
    agent = Agent(ScriptedModel(["whole", "streamed", "agui"]))
    app = create_app(agent)
    manager = app.state.plait.runs
    transport = httpx.ASGITransport(app=app)
    chat = {"model": "plait", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        whole = await client.post("/v1/chat/completions", json={**chat, "user": "u1"})
        streamed = await client.post("/v1/chat/completions", json={**chat, "stream": True})
        body = {
            "threadId": "ag-1",
            "runId": "r-ag",
            "messages": [{"id": "u1", "role": "user", "content": "go"}],
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": {},
        }
        agui = await client.post("/agui", json=body)
        failed = await client.post("/v1/chat/completions", json={**chat, "user": "u2"})
    assert whole.status_code == 200
    assert whole.json()["choices"][0]["message"]["content"] == "whole"
    pieces = [
        json.loads(line[6:])["choices"][0]["delta"].get("content", "")
        for line in streamed.text.splitlines()
        if line.startswith("data: {")
    ]
    assert "".join(pieces) == "streamed" and "data: [DONE]" in streamed.text
    finished = [json.loads(line[6:]) for line in agui.text.splitlines() if '"RUN_FINISHED"' in line]
    assert [e["result"] for e in finished] == ["agui"]
    # The script is spent: the fourth turn fails, and its request says so (not 200 and '').
    assert failed.status_code == 502 and failed.json()["error"]["type"] == "agent_error"
    failed_run = manager.get(failed.headers["X-Plait-Run"])  # the error names its run
    assert failed_run is not None and failed_run.view()["status"] == "error"
    ids = [whole.headers["X-Plait-Run"], streamed.headers["X-Plait-Run"], "r-ag"]
    ran = [manager.get(i) for i in ids]
    assert all(r is not None and r.compacted and r.holds == 0 for r in ran)  # let go after


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
async def test_a_client_gone_before_the_first_byte_cancels_the_run_it_started(spec: str) -> None:
    """Starlette never starts the body of a response whose client left before its headers
    went out (2.4: ``send`` raises; 2.3: the disconnect wins the race), so the body's own
    cleanup cannot be where the run is settled: the response settles it."""
    gate = asyncio.Event()

    async def answer(request: object) -> str:
        await gate.wait()  # never set: only a cancel ends this turn
        return "late"

    app = create_app(Agent(FunctionModel(answer)))
    state = app.state.plait
    run = state.runs.start(next(iter(state.agents.values())), "plait", "t", [UserMessage("hi")])

    async def body() -> AsyncIterator[str]:
        async for _ in run.stream():
            yield "data: x\n\n"

    response = state.sse(None, run, body(), {})
    assert run.holds == 1  # held from the handler on

    async def gone() -> dict[str, str]:
        return {"type": "http.disconnect"}

    async def send(message: Mapping[str, object]) -> None:
        if spec == "2.4":
            raise OSError("the client went away")
        await asyncio.sleep(10)  # headers stuck in a dead socket: the disconnect comes first

    scope = {"type": "http", "asgi": {"spec_version": spec}}
    with contextlib.suppress(Exception):
        await asyncio.wait_for(response(scope, gone, send), timeout=5)
    assert run.status == "cancelled" and run.holds == 0


async def test_a_run_cancelled_before_its_task_began_ends_cancelled_and_frees_its_place() -> None:
    """Cancelled before its first step, a run's task never enters its turn: the run still ends
    (not ``pending`` for ever) and gives back its place in the thread's queue (eight such
    cancels made the thread refuse every later run with 429)."""
    limits = ServeLimits(max_waiting_per_thread=1)
    manager = RunManager(limits)
    agent = Agent(ScriptedModel(["after"]))
    for _ in range(3):
        run = manager.start(agent, "plait", "t", [UserMessage("hi")])
        await manager.cancel(run)  # before the loop ever ran its task
        assert run.status == "cancelled" and run.done and run.view()["status"] == "cancelled"
    after = await finished(manager, agent, "t", "then")
    assert after.status == "success" and after.view()["output"] == "after"


async def test_a_run_cancelled_unstarted_while_another_ends_leaves_no_lock_behind() -> None:
    """The running turn ends in the loop step between the waiting run's cancelled first step
    and that run's done callback: the ending turn still counts the other as waiting and keeps
    the thread's lock, so the callback drops it (one Lock a thread id was left otherwise)."""
    gate = asyncio.Event()

    async def answer(request: object) -> str:
        await gate.wait()
        return "first"

    manager = RunManager(ServeLimits())
    agent = Agent(FunctionModel(answer))
    first = manager.start(agent, "plait", "t", [UserMessage("one")])
    for _ in range(20):  # the first turn takes the thread's lock and waits in its model
        await asyncio.sleep(0)
    second = manager.start(agent, "plait", "t", [UserMessage("two")])
    assert second.task is not None and first.task is not None
    second.task.cancel()  # its first step, queued before the first turn's next one
    gate.set()
    await asyncio.wait([first.task, second.task])
    for _ in range(5):
        await asyncio.sleep(0)
    assert (first.status, second.status) == ("success", "cancelled")
    assert "t" not in manager._threads and not manager._waiting
