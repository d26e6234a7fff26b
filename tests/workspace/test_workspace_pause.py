"""``Workspace(approve="pause")``: a gated write pauses the turn and runs only once a resume
approves it (issue 26); ungated reads run at once."""

from __future__ import annotations

from pathlib import Path

from plait import Agent, ScriptedModel, ToolCall, ToolMessage
from plait.runtime import Approve, Reject
from plait.workspace import Workspace


async def test_a_gated_write_pauses_and_runs_once_approved(tmp_path: Path) -> None:
    workspace = Workspace(str(tmp_path), approve="pause")
    calls = [
        ToolCall("w1", "write_file", {"path": "a.txt", "content": "hello"}),
        ToolCall("l1", "ls", {}),
    ]
    agent = Agent(ScriptedModel([calls, "written"]), tools=workspace.tools())
    paused = await agent.run("write a.txt", thread_id="t")
    assert [p.id for p in paused.pending] == ["w1"]
    assert not (tmp_path / "a.txt").exists()

    result = await agent.resume("t", {"w1": Approve(by="me")})

    assert result.output == "written"
    assert (tmp_path / "a.txt").read_text() == "hello"
    data = {m.tool_call_id: m.is_error for m in result.new_messages if isinstance(m, ToolMessage)}
    assert data == {"w1": False, "l1": False}


async def test_allow_still_lets_a_write_run_without_pausing(tmp_path: Path) -> None:
    workspace = Workspace(str(tmp_path), approve="pause", allow=["write"])
    call = ToolCall("w1", "write_file", {"path": "b.txt", "content": "x"})
    agent = Agent(ScriptedModel([call, "ok"]), tools=workspace.tools())
    result = await agent.run("go", thread_id="t")
    assert not result.paused and (tmp_path / "b.txt").read_text() == "x"


async def test_a_rejected_shell_call_never_runs(tmp_path: Path) -> None:
    workspace = Workspace(str(tmp_path), approve="pause")
    call = ToolCall("s1", "shell", {"command": "touch ran"})
    agent = Agent(ScriptedModel([call, "fine"]), tools=workspace.tools())
    await agent.run("go", thread_id="t")
    result = await agent.resume("t", {"s1": Reject("no shell today")})
    assert result.output == "fine" and not (tmp_path / "ran").exists()
