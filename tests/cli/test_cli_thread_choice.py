"""Which thread ``plait run`` / ``plait chat`` continue: ``--thread`` by a unique prefix (as git
takes commits) and ``-c`` per folder (the latest thread started in the current one)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer
from cli_inprocess import empty_home
from typer.testing import CliRunner, Result
from wire_server import WireServer

from plait.cli.app import app
from plait.cli.thread_choice import (
    MAX_CANDIDATES_SHOWN,
    THREAD_FOLDER_KEY,
    AmbiguousThread,
    UnknownThread,
    match_thread_id,
)

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path, with tmp_path/project the current folder and an empty $PLAIT_HOME."""
    return empty_home(tmp_path, monkeypatch)


def plait(server: WireServer, *args: str) -> Result:
    spec = f"openai-compatible:test-model@{server.url}/v1"
    return CliRunner().invoke(app, [*args, "--model", spec], env={"COLUMNS": "200"})


def thread_of(result: Result) -> str:
    return result.stderr.split("thread: ")[1].split()[0]


def users(server: WireServer, index: int) -> list[str]:
    return [m["content"] for m in server.bodies()[index]["messages"] if m["role"] == "user"]


def test_continue_takes_the_latest_thread_started_in_this_folder(
    server: WireServer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: -c continued the latest thread of the store, whichever folder it belonged to.
    other = home / "other"
    other.mkdir()
    server._replies.extend(sse_answer(t) for t in ("A1.", "B1.", "A2.", "B2."))
    first = plait(server, "run", "about project A")
    assert first.exit_code == 0, first.output
    monkeypatch.chdir(other)
    second = plait(server, "run", "about folder B")
    assert second.exit_code == 0, second.output
    monkeypatch.chdir(home / "project")
    again = plait(server, "run", "more on A", "-c")
    assert again.exit_code == 0, again.output
    assert users(server, 2) == ["about project A", "more on A"]
    assert thread_of(again) == thread_of(first)
    monkeypatch.chdir(other)
    assert plait(server, "run", "more on B", "-c").exit_code == 0
    assert users(server, 3) == ["about folder B", "more on B"]


def test_continue_in_a_folder_where_nothing_was_started_names_it(
    server: WireServer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server._replies.append(sse_answer("A1."))
    assert plait(server, "run", "about project A").exit_code == 0
    elsewhere = home / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = plait(server, "run", "hi", "-c")
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert f"No conversation was started in {elsewhere.resolve()}" in message
    assert "1 thread was started in other folders" in message and "--thread ID" in message
    assert len(server.received) == 1


def test_continue_falls_back_to_threads_that_record_no_folder(
    server: WireServer, home: Path
) -> None:
    from plait.messages import AssistantMessage, Message, UserMessage
    from plait.stores.sqlite import SQLiteThreadStore

    async def seed() -> None:  # as plait wrote threads before it recorded folders
        store = SQLiteThreadStore(home / "plait-home" / "threads.sqlite3")
        messages: list[Message] = [UserMessage("from before"), AssistantMessage("Old.")]
        await store.append("legacy", messages, expected_version=0)
        await store.aclose()

    asyncio.run(seed())
    server._replies.append(sse_answer("New."))
    result = plait(server, "run", "and now", "-c")
    assert result.exit_code == 0, result.output
    assert users(server, 0) == ["from before", "and now"]


def test_a_new_thread_records_its_folder_and_a_continued_one_keeps_it(
    server: WireServer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plait.stores.sqlite import SQLiteThreadStore

    server._replies.extend([sse_answer("One."), sse_answer("Two.")])
    first = plait(server, "run", "start")
    other = home / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    assert plait(server, "run", "go on", "--thread", thread_of(first)).exit_code == 0
    store = SQLiteThreadStore(home / "plait-home" / "threads.sqlite3")
    state = asyncio.run(store.load(thread_of(first))).state
    asyncio.run(store.aclose())
    assert state[THREAD_FOLDER_KEY] == str((home / "project").resolve())


def test_thread_takes_a_unique_prefix_in_any_case(server: WireServer, home: Path) -> None:
    server._replies.extend([sse_answer("One."), sse_answer("Two.")])
    first = plait(server, "run", "remember me")
    thread = thread_of(first)
    result = plait(server, "run", "again", "--thread", thread[:7].upper())
    assert result.exit_code == 0, result.output
    assert users(server, 1) == ["remember me", "again"]
    assert thread_of(result) == thread


def test_an_ambiguous_thread_prefix_is_a_usage_error_and_sends_nothing(
    server: WireServer, home: Path
) -> None:
    from plait.messages import UserMessage
    from plait.stores.sqlite import SQLiteThreadStore

    async def seed() -> None:
        store = SQLiteThreadStore(home / "plait-home" / "threads.sqlite3")
        for thread_id in ("beef0001", "beef0002"):
            await store.append(thread_id, [UserMessage("q")], expected_version=0)
        await store.aclose()

    asyncio.run(seed())
    for command in (["run", "hi"], ["chat"]):
        result = plait(server, *command, "--thread", "beef")
        assert result.exit_code == 2, result.output
        message = " ".join(result.stderr.split())
        assert "prefix 'beef' matches 2 threads: beef0002, beef0001" in message
    assert server.received == []


def test_matching_prefers_the_whole_id_and_bounds_the_candidates_listed() -> None:
    ids = [f"cafe{i:04d}" for i in range(25)]
    assert match_thread_id([*ids, "cafe"], "cafe") == "cafe"
    assert match_thread_id(["T1", "t10"], "t1") == "T1"
    with pytest.raises(AmbiguousThread) as ambiguous:
        match_thread_id(ids, "CAFE")
    assert len(ambiguous.value.candidates) == 25
    assert str(ambiguous.value).count("cafe0") == MAX_CANDIDATES_SHOWN
    assert f"and {25 - MAX_CANDIDATES_SHOWN} more" in str(ambiguous.value)
    with pytest.raises(UnknownThread, match="'  '"):
        match_thread_id(ids, "  ")
