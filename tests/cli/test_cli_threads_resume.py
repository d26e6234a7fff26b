"""``plait threads resume ID``: a turn paused on a workspace write is decided from the flags
(``--approve-all``, ``--approve TOOL``, ``--deny-all``; with no terminal, deny by default) and goes
on, end to end with a scripted wire model (issue 26)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer
from cli_inprocess import empty_home
from typer.testing import CliRunner, Result
from wire_server import WireServer

from plait import Agent, ScriptedModel, ToolCall
from plait.cli.app import app
from plait.runtime.pause import PENDING_KEY
from plait.stores import SQLiteThreadStore
from plait.workspace import Workspace

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return empty_home(tmp_path, monkeypatch) / "project"


def _pause(store_path: Path, project: Path) -> None:
    async def go() -> None:
        store = SQLiteThreadStore(store_path)
        tools = Workspace(str(project), approve="pause").tools()
        call = ToolCall("w1", "write_file", {"path": "out.txt", "content": "hi"})
        result = await Agent(ScriptedModel([call]), tools=tools, store=store).run(
            "write out.txt", thread_id="0123abcd"
        )
        assert result.paused
        await store.aclose()

    asyncio.run(go())


def _resume(server: WireServer, store: Path, *flags: str) -> Result:
    spec = f"openai-compatible:m@{server.url}/v1"
    args = ["threads", "resume", "0123", "--store", str(store), "--model", spec, *flags]
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def _state(store_path: Path) -> dict[str, object]:
    async def go() -> dict[str, object]:
        store = SQLiteThreadStore(store_path)
        state = (await store.load("0123abcd")).state
        await store.aclose()
        return state

    return asyncio.run(go())


@pytest.mark.parametrize("flags", [["--approve-all"], ["--approve", "write_*"]])
def test_approving_from_the_flags_runs_the_held_write(
    server: WireServer, project: Path, flags: list[str]
) -> None:
    store = project / "threads.db"
    _pause(store, project)
    server._replies.append(sse_answer("Wrote it."))

    result = _resume(server, store, *flags)

    assert result.exit_code == 0, result.output
    assert (project / "out.txt").read_text() == "hi"
    assert PENDING_KEY not in _state(store)
    [tool] = [m for m in server.bodies()[0]["messages"] if m["role"] == "tool"]
    assert "out.txt" in tool["content"]


@pytest.mark.parametrize("flags", [["--deny-all"], []])
def test_denying_or_nobody_to_ask_rejects_the_held_write(
    server: WireServer, project: Path, flags: list[str]
) -> None:
    store = project / "threads.db"
    _pause(store, project)
    server._replies.append(sse_answer("Understood."))

    result = _resume(server, store, *flags)

    assert result.exit_code == 0, result.output
    assert not (project / "out.txt").exists()
    [tool] = [m for m in server.bodies()[0]["messages"] if m["role"] == "tool"]
    assert "rejected" in tool["content"].lower()


def test_a_thread_that_is_not_paused_or_already_claimed_fails_with_a_message(
    server: WireServer, project: Path
) -> None:
    store_path = project / "threads.db"
    _pause(store_path, project)

    async def claim() -> None:  # as a resume that died after its claim left it
        store = SQLiteThreadStore(store_path)
        snapshot = await store.load("0123abcd")
        state = dict(snapshot.state)
        state[PENDING_KEY] = {**state[PENDING_KEY], "claimed": {"at": 1.0}}
        await store.append("0123abcd", [], expected_version=snapshot.version, state=state)
        await store.aclose()

    asyncio.run(claim())
    claimed = _resume(server, store_path, "--approve-all")
    assert claimed.exit_code == 1
    assert "did not finish" in claimed.output
    assert not (project / "out.txt").exists()

    async def fresh() -> None:
        store = SQLiteThreadStore(store_path)
        await Agent(ScriptedModel(["hi"]), store=store).run("hello", thread_id="4567efgh")
        await store.aclose()

    asyncio.run(fresh())
    spec = f"openai-compatible:m@{server.url}/v1"
    args = ["threads", "resume", "4567", "--store", str(store_path), "--model", spec]
    not_paused = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert not_paused.exit_code == 2 and "not paused" in not_paused.output
