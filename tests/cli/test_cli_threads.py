"""``plait threads …`` without a run behind it and on missing, damaged or non-file stores (a
message, not a traceback), and on a narrow terminal (ids kept whole)."""

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


@pytest.mark.parametrize("command", ["show", "delete"])
def test_threads_show_or_delete_before_any_run_is_a_failure(tmp_path: Path, command: str) -> None:
    result = plait("threads", command, "nope", home=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "No thread nope" in result.stderr


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


def test_threads_help_mentions_delete(tmp_path: Path) -> None:
    result = plait("--help", home=tmp_path)
    assert re.search(r"threads\s+List, show and delete", result.stdout), result.stdout
