"""Subagents: the ``task`` tool, child threads, events and usage rolled up, limits across the
tree, and failures the parent's model reads as tool errors."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from plait import Agent
from plait.messages import Message, ToolCall, ToolMessage, Usage
from plait.models.base import ModelRequest, ModelResponse
from plait.models.scripted import FunctionModel, ScriptedModel, ScriptEntry
from plait.runtime import DispatchFinished, Limits
from plait.skills import SkillsMiddleware
from plait.skills.managed import allow_all, create_skill_manager
from plait.skills.sources.memory import MemorySource
from plait.stores.sqlite import SQLiteThreadStore
from plait.subagents import Subagent, SubagentEventRelayed, Subagents, TreeLimits

WAIT = 10.0  # seconds a handshake may wait before the test fails


def md(name: str) -> str:
    return f"---\nname: {name}\ndescription: {name} work. Use for {name}.\n---\nDo {name}.\n"


def task(call_id: str, name: str, text: str) -> ToolCall:
    return ToolCall(call_id, "task", {"subagent_type": name, "description": text})


def answer(text: str, tokens: int) -> ModelResponse:
    return ModelResponse(text, usage=Usage(input_tokens=tokens, output_tokens=1, requests=1))


def results(messages: Sequence[Message]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


async def test_two_subagents_in_both_skill_modes_run_in_parallel_on_their_own_threads(
    tmp_path: Path,
) -> None:
    started = {"pdf": asyncio.Event(), "docs": asyncio.Event()}

    def child(me: str, other: str, first: ScriptEntry) -> FunctionModel:
        calls = 0

        async def reply(request: ModelRequest) -> ScriptEntry:
            nonlocal calls
            calls += 1
            if calls == 1:  # each waits for the other to have started: they run together
                started[me].set()
                await asyncio.wait_for(started[other].wait(), WAIT)
                return first
            return answer(f"{me} done", 10)

        return FunctionModel(reply, name=me)

    manager = await create_skill_manager(
        sources=[MemorySource({"pdf": {"SKILL.md": md("pdf")}})], gate=allow_all
    )
    managed = Agent(
        child("pdf", "docs", ToolCall("l1", "load_skill", {"skill": "pdf"})),
        middleware=[*manager.middleware],
    )
    disclosure_model = child("docs", "pdf", answer("docs skimmed", 5))
    disclosure = Agent(
        disclosure_model,
        middleware=[SkillsMiddleware(sources=[MemorySource({"docs": {"SKILL.md": md("docs")}})])],
    )
    parent_model = ScriptedModel(
        [
            [task("c1", "pdf", "Extract the PDF."), task("c2", "docs", "Skim the docs.")],
            answer("All done.", 100),
        ]
    )
    store = SQLiteThreadStore(tmp_path / "threads.db")
    agent = Agent(
        parent_model,
        store=store,
        middleware=[
            Subagents(
                {
                    "pdf": Subagent("Works on PDFs.", managed),
                    "docs": Subagent("Reads docs.", disclosure),
                }
            )
        ],
    )
    events = []
    stream = agent.stream("Do both.", thread_id="t")
    async for event in stream:
        events.append(event)
    result = stream.result
    assert result is not None and result.output == "All done."
    # The parent's model read only the answers.
    assert [r.data for r in results(result.new_messages)] == ["pdf done", "docs skimmed"]
    # Usage is the tree's, exactly: parent (0 + 100), pdf (0 + 10), docs (5).
    assert result.usage.input_tokens == 115
    assert (result.usage.output_tokens, result.usage.requests) == (3, 3)
    # Child events arrive tagged with name, depth and thread.
    tagged = [e for e in events if isinstance(e, SubagentEventRelayed)]
    assert {(e.name, e.depth, e.thread_id) for e in tagged} == {
        ("pdf", 1, "t/c1"),
        ("docs", 1, "t/c2"),
    }
    assert any(isinstance(e.event, DispatchFinished) for e in tagged)
    # Managed mode: load_skill ran in the child; disclosure mode: the catalog in its prompt.
    pdf_thread = await store.load("t/c1")
    assert any(isinstance(m, ToolMessage) and "pdf" in str(m.data) for m in pdf_thread.messages)
    assert "docs" in disclosure_model.requests[0].system_prompt
    # The parent's thread holds none of the children's messages.
    parent_thread = await store.load("t")
    assert not any(
        isinstance(m, ToolMessage) and m.tool_call_id == "l1" for m in parent_thread.messages
    )
    await store.aclose()
    await manager.aclose()

    # The child's thread, reopened by another process.
    code = (
        "import asyncio, json, sys\n"
        "from plait.stores.sqlite import SQLiteThreadStore\n"
        "async def main():\n"
        "    store = SQLiteThreadStore(sys.argv[1])\n"
        "    snap = await store.load('t/c2')\n"
        "    print(json.dumps([type(m).__name__ for m in snap.messages]))\n"
        "    await store.aclose()\n"
        "asyncio.run(main())\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, str(tmp_path / "threads.db"), stdout=subprocess.PIPE
    )
    stdout, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    assert json.loads(stdout) == ["UserMessage", "AssistantMessage"]


def parent_over(sub: Subagent, **options: object) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([task("c1", "x", "Do it."), "I will do it myself."])
    agent = Agent(model, middleware=[Subagents({"x": sub}, **options)])  # type: ignore[arg-type]
    return agent, model


async def test_a_child_that_raises_is_a_tool_error_and_the_parent_goes_on() -> None:
    def boom(request: ModelRequest) -> ScriptEntry:
        raise RuntimeError("the child broke")

    agent, model = parent_over(Subagent("Breaks.", Agent(FunctionModel(boom))))
    result = await agent.run("Go.", thread_id="p")
    [failed] = results(result.new_messages)
    assert model.requests[1].messages[-1] == failed  # the parent's model read the error
    assert failed.is_error and "the child broke" in str(failed.data)
    assert "p/c1" in str(failed.data)
    assert result.output == "I will do it myself."


async def test_a_child_past_the_tree_deadline_is_stopped_and_the_parent_goes_on() -> None:
    async def stall(request: ModelRequest) -> ScriptEntry:
        await asyncio.Event().wait()
        return "never"

    sub = Subagent("Stalls.", Agent(FunctionModel(stall)))
    agent, model = parent_over(sub, limits=TreeLimits(timeout=0.2))
    result = await agent.run("Go.")
    [failed] = results(result.new_messages)
    assert model.requests[1].messages[-1] == failed  # the parent's model read the error
    assert failed.is_error and "deadline" in str(failed.data)
    assert result.output == "I will do it myself."


async def test_a_child_over_its_own_tool_timeout_is_a_tool_error() -> None:
    async def stall(request: ModelRequest) -> ScriptEntry:
        await asyncio.Event().wait()
        return "never"

    agent, model = parent_over(Subagent("Stalls.", Agent(FunctionModel(stall))), timeout=0.2)
    result = await agent.run("Go.")
    [failed] = results(result.new_messages)
    assert model.requests[1].messages[-1] == failed  # the parent's model read the error
    assert failed.is_error and "timed out" in str(failed.data)


async def test_the_tree_model_call_budget_stops_a_looping_child() -> None:
    from plait.tools import tool

    @tool
    def again() -> str:
        """Loop."""
        return "again"

    loop = FunctionModel(lambda request: ToolCall(f"a{len(request.messages)}", "again", {}))
    sub = Subagent("Loops.", Agent(loop, tools=[again], default_guards=False))
    agent, model = parent_over(sub, limits=TreeLimits(max_model_calls=3))
    result = await agent.run("Go.")
    [failed] = results(result.new_messages)
    assert model.requests[1].messages[-1] == failed  # the parent's model read the error
    assert failed.is_error and "budget (3)" in str(failed.data)
    assert len(loop.requests) == 3  # the fourth call never reached the model
    assert result.output == "I will do it myself."


async def test_the_depth_limit_refuses_a_grandchild() -> None:
    grandchild = Agent(ScriptedModel(["never runs"]))
    child_model = ScriptedModel([task("g1", "deeper", "Go deeper."), answer("child answer", 3)])
    child = Agent(child_model, middleware=[Subagents({"deeper": Subagent("Deeper.", grandchild)})])
    model = ScriptedModel([task("c1", "x", "Do it."), "ok"])
    agent = Agent(
        model,
        middleware=[Subagents({"x": Subagent("Child.", child)}, limits=TreeLimits(max_depth=1))],
    )
    result = await agent.run("Go.")
    assert [r.data for r in results(result.new_messages)] == ["child answer"]
    refused = child_model.requests[1].messages[-1]
    assert isinstance(refused, ToolMessage) and "depth limit (1)" in str(refused.data)


async def test_a_factory_makes_a_fresh_agent_per_call_and_parallel_calls_are_bounded() -> None:
    running, peak = 0, 0
    gate = asyncio.Event()

    async def reply(request: ModelRequest) -> ScriptEntry:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            gate.set()
        await asyncio.wait_for(gate.wait(), WAIT)
        running -= 1
        return answer("ok", 1)

    made: list[Agent] = []

    def factory() -> Agent:
        made.append(Agent(FunctionModel(reply)))
        return made[-1]

    calls = [task(f"c{i}", "x", f"job {i}") for i in range(4)]
    model = ScriptedModel([calls, "done"])
    agent = Agent(
        model,
        middleware=[Subagents({"x": Subagent("Worker.", factory)})],
        limits=Limits(max_concurrent_tools=2),
    )
    result = await agent.run("Go.")
    assert len(made) == 4 and peak == 2
    assert result.usage.input_tokens == 4


async def test_a_grandchilds_usage_and_events_reach_the_root_once() -> None:
    grandchild = Agent(ScriptedModel([answer("deep answer", 7)]))
    child_model = ScriptedModel([task("g1", "deeper", "Go deeper."), answer("child answer", 3)])
    child = Agent(child_model, middleware=[Subagents({"deeper": Subagent("Deeper.", grandchild)})])
    model = ScriptedModel([task("c1", "x", "Do it."), answer("ok", 100)])
    agent = Agent(model, middleware=[Subagents({"x": Subagent("Child.", child)})])
    result = await agent.run("Go.", thread_id="r")
    assert result.usage.input_tokens == 110
    finished = [
        (e.name, e.depth, e.thread_id, e.call_id)
        for e in result.events
        if isinstance(e, SubagentEventRelayed) and isinstance(e.event, DispatchFinished)
    ]
    # call_id: the tool call that runs the subagent, in its parent's thread.
    assert sorted(finished) == [
        ("deeper", 2, "r/c1/g1", "g1"),
        ("x", 1, "r/c1", "c1"),
        ("x", 1, "r/c1", "c1"),
    ]
    deep = await agent.store.load("r/c1/g1")
    assert [type(m).__name__ for m in deep.messages] == ["UserMessage", "AssistantMessage"]
