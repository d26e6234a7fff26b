"""A paused subagent pauses its parent, and ``agent.resume(parent, decisions)`` reaches it: the
child finishes, its answer is the parent's tool result, the parent goes on (also two levels
down, and beside a sibling that finished)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from plait import Agent
from plait.messages import ToolCall, ToolMessage, Usage
from plait.models.base import ModelResponse
from plait.models.scripted import ScriptedModel
from plait.runtime import Approve, PendingCall, Reject
from plait.runtime.events import SubagentEventRelayed, TurnPaused, TurnResumed
from plait.runtime.pause import PENDING_KEY, SubagentPending
from plait.stores.sqlite import SQLiteThreadStore
from plait.subagents import Subagent, Subagents
from plait.tools import tool


def task(call_id: str, name: str, text: str) -> ToolCall:
    return ToolCall(call_id, "task", {"subagent_type": name, "description": text})


def answer(text: str, tokens: int) -> ModelResponse:
    return ModelResponse(text, usage=Usage(input_tokens=tokens, output_tokens=1, requests=1))


class World:
    """The child's gated tool and what it did."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

        @tool(requires_approval=True)
        def delete(path: str) -> str:
            """Delete a file."""
            self.deleted.append(path)
            return f"deleted {path}"

        self.delete = delete


def ops(world: World, *script: object) -> Agent:
    return Agent(ScriptedModel(list(script)), tools=[world.delete])  # type: ignore[arg-type]


def parent(store: SQLiteThreadStore, child: Agent, *script: object) -> Agent:
    return Agent(
        ScriptedModel(list(script)),  # type: ignore[arg-type]
        store=store,
        middleware=[Subagents({"ops": Subagent("Deletes files.", child)})],
    )


async def test_a_paused_child_pauses_the_parent_and_the_resume_reaches_it(tmp_path: Path) -> None:
    world, db = World(), tmp_path / "threads.db"
    store = SQLiteThreadStore(db)
    child = ops(world, ToolCall("d1", "delete", {"path": "x.txt"}), "never")
    agent = parent(store, child, task("c1", "ops", "Delete x.txt."), "never")
    paused = await agent.run("Clean up.", thread_id="t")
    assert paused.paused and world.deleted == []
    [pending] = paused.pending
    assert pending.id == "c1/d1" and pending.call_id == "c1"
    assert (pending.name, pending.args) == ("delete", {"path": "x.txt"})
    assert pending.subagent == SubagentPending("ops", 1, "t/c1", "c1", "d1")
    assert "subagent 'ops'" in pending.reason and "delete requires approval" in pending.reason
    assert [e.pending for e in paused.events if isinstance(e, TurnPaused)] == [[pending]]
    relayed = [e for e in paused.events if isinstance(e, SubagentEventRelayed)]
    assert any(isinstance(e.event, TurnPaused) and e.call_id == "c1" for e in relayed)
    # Both threads are paused; the parent's held call has no result in its history.
    parent_thread, child_thread = await store.load("t"), await store.load("t/c1")
    assert [p["id"] for p in parent_thread.state[PENDING_KEY]["pending"]] == ["c1/d1"]
    assert [p["id"] for p in child_thread.state[PENDING_KEY]["pending"]] == ["d1"]
    assert not any(isinstance(m, ToolMessage) for m in parent_thread.messages)
    await store.aclose()

    # The resume: new agents over the same database (nothing of the first run is in memory).
    store = SQLiteThreadStore(db)
    child_model = ScriptedModel([answer("x.txt is gone.", 7)])
    parent_model = ScriptedModel([answer("Cleaned up.", 100)])
    child = Agent(child_model, tools=[world.delete])
    agent = Agent(
        parent_model,
        store=store,
        middleware=[Subagents({"ops": Subagent("Deletes files.", child)})],
    )
    done = await agent.resume("t", {"c1/d1": Approve(by="test")})
    assert done.output == "Cleaned up." and not done.paused
    assert world.deleted == ["x.txt"]
    # The child read its tool's result and answered; that answer is the parent's tool result.
    assert child_model.requests[0].messages[-1].data == "deleted x.txt"  # type: ignore[union-attr]
    [result] = [m for m in done.new_messages if isinstance(m, ToolMessage)]
    assert (result.tool_call_id, result.data, result.is_error) == ("c1", "x.txt is gone.", False)
    assert parent_model.requests[0].messages[-1] == result
    resumed = [e for e in done.events if isinstance(e, SubagentEventRelayed)]
    assert any(isinstance(e.event, TurnResumed) and e.thread_id == "t/c1" for e in resumed)
    # The child's answer and the parent's, after the resume: exactly.
    assert (done.usage.input_tokens, done.usage.requests) == (107, 2)
    for thread in ("t", "t/c1"):
        snapshot = await store.load(thread)
        assert PENDING_KEY not in snapshot.state
    child_thread = await store.load("t/c1")
    assert [type(m).__name__ for m in child_thread.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
    ]
    await store.aclose()


async def test_a_rejection_reaches_the_child_and_its_answer_reaches_the_parent(
    tmp_path: Path,
) -> None:
    world = World()
    store = SQLiteThreadStore(tmp_path / "threads.db")
    child = ops(world, ToolCall("d1", "delete", {"path": "x.txt"}), "I was not allowed to.")
    agent = parent(store, child, task("c1", "ops", "Delete x.txt."), "Left it.")
    paused = await agent.run("Clean up.", thread_id="t")
    done = await agent.resume("t", {p.id: Reject("Keep it.") for p in paused.pending})
    assert done.output == "Left it." and world.deleted == []
    [result] = [m for m in done.new_messages if isinstance(m, ToolMessage)]
    assert result.data == "I was not allowed to."
    child_thread = await store.load("t/c1")
    rejected = child_thread.messages[2]
    assert isinstance(rejected, ToolMessage) and rejected.is_error and rejected.data == "Keep it."
    await store.aclose()


async def test_a_grandchilds_pause_reaches_the_root_and_back_beside_a_finished_sibling(
    tmp_path: Path,
) -> None:
    world = World()
    store = SQLiteThreadStore(tmp_path / "threads.db")
    grandchild = ops(world, ToolCall("d1", "delete", {"path": "deep.txt"}), "deep done")
    middle = Agent(
        ScriptedModel([task("g1", "ops", "Delete deep.txt."), "middle done"]),
        middleware=[Subagents({"ops": Subagent("Deletes files.", grandchild)})],
    )
    quick = Agent(ScriptedModel(["quick done"]))
    agent = Agent(
        ScriptedModel([[task("c1", "mid", "Go deep."), task("c2", "quick", "Be quick.")], "all"]),
        store=store,
        middleware=[
            Subagents({"mid": Subagent("Delegates.", middle), "quick": Subagent("Answers.", quick)})
        ],
    )
    paused = await agent.run("Go.", thread_id="r")
    [pending] = paused.pending
    assert pending.id == "c1/g1/d1" and pending.name == "delete"
    assert pending.subagent == SubagentPending("mid", 1, "r/c1", "c1", "g1/d1")
    middle_pending = (await store.load("r/c1")).state[PENDING_KEY]["pending"]
    assert PendingCall.from_json(middle_pending[0]).subagent == SubagentPending(
        "ops", 2, "r/c1/g1", "g1", "d1"
    )
    done = await agent.resume("r", {"c1/g1/d1": Approve()})
    assert done.output == "all" and world.deleted == ["deep.txt"]
    results = [m for m in done.new_messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.data) for m in results] == [
        ("c1", "middle done"),
        ("c2", "quick done"),
    ]
    await store.aclose()


async def test_a_new_run_with_on_paused_reject_rejects_the_subagents_call(
    tmp_path: Path,
) -> None:
    world = World()
    store = SQLiteThreadStore(tmp_path / "threads.db")
    child = ops(world, ToolCall("d1", "delete", {"path": "x.txt"}), "never")
    agent = parent(store, child, task("c1", "ops", "Delete x.txt."), "Moving on.")
    await agent.run("Clean up.", thread_id="t")
    done = await agent.run("Forget it.", thread_id="t", on_paused="reject")
    assert done.output == "Moving on." and world.deleted == []
    parent_thread = await store.load("t")
    [rejected] = [m for m in parent_thread.messages if isinstance(m, ToolMessage)]
    assert rejected.tool_call_id == "c1" and rejected.is_error
    await store.aclose()


RESUME_IN_ANOTHER_PROCESS = """
import asyncio, json, sys
from plait import Agent
from plait.models.scripted import ScriptedModel
from plait.runtime import Approve
from plait.runtime.pause import paused_dispatch
from plait.stores.sqlite import SQLiteThreadStore
from plait.subagents import Subagent, Subagents
from plait.tools import tool

@tool(requires_approval=True)
def delete(path: str) -> str:
    '''Delete a file.'''
    return f"deleted {path} in the other process"

async def main():
    store = SQLiteThreadStore(sys.argv[1])
    pending = paused_dispatch((await store.load("t")).state).pending
    child = Agent(ScriptedModel(["gone"]), tools=[delete])
    agent = Agent(
        ScriptedModel(["Cleaned up elsewhere."]),
        store=store,
        middleware=[Subagents({"ops": Subagent("Deletes files.", child)})],
    )
    result = await agent.resume("t", {p.id: Approve(by="worker") for p in pending})
    child_thread = await store.load("t/c1")
    print(json.dumps({
        "pending": [p.id for p in pending],
        "output": result.output,
        "child": [getattr(m, "data", None) for m in child_thread.messages],
    }))
    await store.aclose()

asyncio.run(main())
"""


async def test_a_paused_subagent_is_resumed_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "threads.db"
    store = SQLiteThreadStore(db)
    world = World()
    child = ops(world, ToolCall("d1", "delete", {"path": "x.txt"}), "never")
    agent = parent(store, child, task("c1", "ops", "Delete x.txt."), "never")
    assert (await agent.run("Clean up.", thread_id="t")).paused
    await store.aclose()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RESUME_IN_ANOTHER_PROCESS, str(db), stdout=subprocess.PIPE
    )
    stdout, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    seen = json.loads(stdout)
    assert seen["pending"] == ["c1/d1"] and seen["output"] == "Cleaned up elsewhere."
    assert seen["child"][2] == "deleted x.txt in the other process" and world.deleted == []
    store = SQLiteThreadStore(db)
    [result] = [m for m in (await store.load("t")).messages if isinstance(m, ToolMessage)]
    assert (result.tool_call_id, result.data) == ("c1", "gone")
    await store.aclose()


async def test_a_child_that_pauses_again_pauses_the_parent_again(tmp_path: Path) -> None:
    world = World()
    store = SQLiteThreadStore(tmp_path / "threads.db")
    child = ops(
        world,
        ToolCall("d1", "delete", {"path": "a"}),
        ToolCall("d2", "delete", {"path": "b"}),
        "both gone",
    )
    agent = parent(store, child, task("c1", "ops", "Delete a and b."), "Done.")
    first = await agent.run("Clean up.", thread_id="t")
    assert [p.id for p in first.pending] == ["c1/d1"]
    second = await agent.resume("t", {"c1/d1": Approve(args={"path": "a2"})})
    assert second.paused and [p.id for p in second.pending] == ["c1/d2"]
    assert world.deleted == ["a2"]  # the edited arguments reached the child
    assert not any(isinstance(m, ToolMessage) for m in (await store.load("t")).messages)
    done = await agent.resume("t", {"c1/d2": Approve()})
    assert done.output == "Done." and world.deleted == ["a2", "b"]
    [result] = [m for m in (await store.load("t")).messages if isinstance(m, ToolMessage)]
    assert (result.tool_call_id, result.data) == ("c1", "both gone")
    await store.aclose()


async def test_an_agent_as_tool_pauses_and_resumes_the_same_way(tmp_path: Path) -> None:
    world = World()
    store = SQLiteThreadStore(tmp_path / "threads.db")
    child = ops(world, ToolCall("d1", "delete", {"path": "x"}), "x is gone")
    agent = Agent(
        ScriptedModel([ToolCall("c1", "cleaner", {"task": "Delete x."}), "Done."]),
        store=store,
        tools=[child.as_tool("cleaner", "Deletes files.")],
    )
    paused = await agent.run("Clean up.", thread_id="t")
    [pending] = paused.pending
    assert pending.subagent == SubagentPending("cleaner", 1, "t/c1", "c1", "d1")
    done = await agent.resume("t", {pending.id: Approve()})
    assert done.output == "Done." and world.deleted == ["x"]
    await store.aclose()


async def test_a_pause_with_a_subagents_call_is_written_in_a_format_older_readers_refuse(
    tmp_path: Path,
) -> None:
    world = World()
    store = SQLiteThreadStore(tmp_path / "threads.db")
    agent = parent(
        store, ops(world, ToolCall("d1", "delete", {"path": "x"}), "-"), task("c1", "ops", "x"), "-"
    )
    await agent.run("Go.", thread_id="t")
    assert (await store.load("t")).state[PENDING_KEY]["format"] == 2
    assert (await store.load("t/c1")).state[PENDING_KEY]["format"] == 1  # its own calls only
    await store.aclose()


async def test_the_trees_usage_counts_every_model_call_once_across_a_childs_pause(
    tmp_path: Path,
) -> None:
    """The calls before the pause (the parent's delegation, the child's gated call) count
    once, at the resume, beside the calls after it: 10 + 20 + 7 + 100 tokens, 4 requests."""
    world, store = World(), SQLiteThreadStore(tmp_path / "threads.db")

    def spent(tokens: int, call: ToolCall) -> ModelResponse:
        return ModelResponse(
            tool_calls=[call], usage=Usage(input_tokens=tokens, output_tokens=1, requests=1)
        )

    child = ops(world, spent(20, ToolCall("d1", "delete", {"path": "x"})))
    agent = parent(store, child, spent(10, task("c1", "ops", "Delete x.")))
    paused = await agent.run("Clean up.", thread_id="t")
    assert paused.paused and (paused.usage.input_tokens, paused.usage.requests) == (10, 1)
    child = ops(world, answer("gone", 7))
    agent = parent(store, child, answer("done", 100))
    done = await agent.resume("t", {"c1/d1": Approve()})
    assert (done.usage.input_tokens, done.usage.requests) == (137, 4)
    await store.aclose()
