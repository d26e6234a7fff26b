"""``plait threads …`` without a run behind it and on missing, damaged or non-file stores (a
message, not a traceback), on a narrow terminal (ids kept whole), and bounded listings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_inprocess import Completed, run_plait


def plait(*args: str, home: Path, columns: int = 200) -> Completed:
    return run_plait(*args, home=home, columns=columns)


@pytest.mark.parametrize("command", [["list"], ["show", "t1"], ["delete", "t1"]])
@pytest.mark.parametrize("kind", ["directory", "garbage"])
def test_threads_on_a_bad_store_is_a_message_not_a_traceback(
    tmp_path: Path, command: list[str], kind: str
) -> None:
    store = tmp_path / "threads.sqlite3"
    if kind == "directory":
        store.mkdir()
    else:
        store.write_text("this is not a database\n" * 100)
    result = plait("threads", *command, "--store", str(store), home=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "SQLite database" in " ".join((result.stdout + result.stderr).split())


def test_threads_list_before_any_run(tmp_path: Path) -> None:
    result = plait("threads", "list", home=tmp_path)
    assert result.returncode == 0 and "No threads yet" in result.stdout


def test_threads_list_shows_the_newest_and_counts_the_rest(tmp_path: Path) -> None:
    # Before: threads list loaded and printed every thread of the store, however many.
    import asyncio

    from plait import Agent, ScriptedModel
    from plait.stores.sqlite import SQLiteThreadStore

    async def seed() -> None:
        store = SQLiteThreadStore(tmp_path / "threads.sqlite3")
        agent = Agent(ScriptedModel(["a", "b", "c"]), store=store)
        for i in range(3):
            await agent.run(f"question {i}", thread_id=f"t{i}")
        await store.aclose()

    asyncio.run(seed())
    listed = plait("threads", "list", "--limit", "2", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "question 2" in listed.stdout and "question 1" in listed.stdout
    assert "question 0" not in listed.stdout
    assert "1 more thread (--limit 0 lists all)" in listed.stdout
    every = plait("threads", "list", "--limit", "0", home=tmp_path)
    assert "question 0" in every.stdout and "more thread" not in every.stdout


@pytest.mark.parametrize("command", ["show", "delete"])
def test_threads_show_or_delete_before_any_run_is_a_usage_error(
    tmp_path: Path, command: str
) -> None:
    result = plait("threads", command, "nope", home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "No thread 'nope'" in result.stderr


def test_threads_list_keeps_ids_whole_on_a_narrow_terminal(tmp_path: Path) -> None:
    import asyncio

    from plait.messages import UserMessage
    from plait.stores.sqlite import SQLiteThreadStore

    thread_id = "0123456789abcdef0123456789abcdef"
    store = SQLiteThreadStore(tmp_path / "threads.sqlite3")
    asyncio.run(
        store.append(thread_id, [UserMessage("a fairly long first question")], expected_version=0)
    )
    asyncio.run(store.aclose())
    result = plait("threads", "list", home=tmp_path, columns=40)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(thread_id, result.stdout), result.stdout


def test_threads_help_mentions_export_and_delete(tmp_path: Path) -> None:
    result = plait("--help", home=tmp_path)
    assert re.search(r"threads\s+List, show, export and delete", result.stdout), result.stdout


@pytest.mark.parametrize("command", ["show", "delete"])
def test_an_unknown_thread_id_is_quoted_and_bounded_in_the_message(
    tmp_path: Path, command: str
) -> None:
    # Before: the id was echoed unquoted ("No thread . See: ...") and whole, however long.
    for thread_id, shown in (("", "No thread ''"), ("x" * 5000, "No thread 'xxx")):
        result = plait("threads", command, thread_id, home=tmp_path)
        assert result.returncode == 2
        message = " ".join(result.stderr.split())
        assert message.startswith(shown) and len(message) < 400, message
