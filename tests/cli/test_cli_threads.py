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


# --- show --json / --full, export, unique-prefix ids ------------------------------------------

LONG = "word " * 100  # 500 characters: clipped on a `show` line


def _seed_rich_thread(home: Path, thread_id: str = "3f2a9c0d" + "0" * 24) -> tuple[str, bytes]:
    """A thread with an image, a PDF, reasoning, a tool call whose result has backticks, and
    long texts; returns its id and the image bytes."""
    import asyncio

    from images import png

    from plait.messages import (
        AssistantMessage,
        Message,
        TextPart,
        ToolCall,
        ToolMessage,
        UserMessage,
    )
    from plait.parts import Blob, FilePart, ImagePart, ReasoningPart
    from plait.stores.sqlite import SQLiteThreadStore

    image = png(3, 2)
    pdf = b"%PDF-1.4\n%%EOF\n"
    messages: list[Message] = [
        UserMessage([TextPart("What is in this picture? " + LONG), ImagePart(Blob(image))]),
        AssistantMessage(
            [ReasoningPart("anthropic", "Let me look at the file.", {"type": "thinking"})],
            tool_calls=[ToolCall("c1", "read_file", {"path": "report.pdf"})],
        ),
        ToolMessage(
            "c1",
            "read_file",
            "```python\nprint(1)\n``` and " + LONG,
            parts=[FilePart(Blob(pdf), "application/pdf", "report.pdf")],
        ),
        AssistantMessage("A small image and a report. " + LONG),
    ]

    async def seed() -> None:
        store = SQLiteThreadStore(home / "threads.sqlite3")
        await store.append(thread_id, messages, expected_version=0, state={"k": 1})
        await store.aclose()

    asyncio.run(seed())
    return thread_id, image


def test_show_json_gives_parts_by_reference_never_bytes(tmp_path: Path) -> None:
    import base64
    import hashlib
    import json

    from images import png

    thread_id, image = _seed_rich_thread(tmp_path)
    result = plait("threads", "show", thread_id[:6], "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["thread_id"] == thread_id and doc["version"] == 1 and doc["state"] == {"k": 1}
    assert [m["role"] for m in doc["messages"]] == ["user", "assistant", "tool", "assistant"]
    picture = doc["messages"][0]["content"][1]
    assert picture == {
        "type": "image",
        "media_type": "image/png",
        "size": len(image),
        "sha256": hashlib.sha256(image).hexdigest(),
    }
    report = doc["messages"][2]["parts"][0]
    assert report["type"] == "file" and report["filename"] == "report.pdf"
    assert set(report) == {"type", "media_type", "size", "sha256", "filename"}
    assert base64.b64encode(png(3, 2)).decode() not in result.stdout


def test_show_clips_long_texts_unless_full(tmp_path: Path) -> None:
    thread_id, _ = _seed_rich_thread(tmp_path)
    clipped = plait("threads", "show", thread_id, home=tmp_path)
    full = plait("threads", "show", thread_id, "--full", home=tmp_path)
    assert clipped.returncode == 0 and full.returncode == 0, clipped.stderr + full.stderr
    assert LONG.strip() not in clipped.stdout
    assert ("A small image and a report. " + LONG).strip() in full.stdout
    assert "print(1)" in full.stdout and '{"path": "report.pdf"}' in full.stdout
    for shown in (clipped.stdout, full.stdout):
        assert "[image image/png" in shown and "[file report.pdf application/pdf" in shown


def test_export_json_is_lossless(tmp_path: Path) -> None:
    import asyncio
    import json

    from plait.messages import load_messages
    from plait.stores.sqlite import SQLiteThreadStore

    thread_id, _ = _seed_rich_thread(tmp_path)
    out = tmp_path / "thread.json"
    result = plait("threads", "export", thread_id[:8].upper(), "-o", str(out), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"Wrote thread {thread_id} to {out}" in " ".join(result.stderr.split())
    doc = json.loads(out.read_text(encoding="utf-8"))
    store = SQLiteThreadStore(tmp_path / "threads.sqlite3")
    stored = asyncio.run(store.load(thread_id))
    asyncio.run(store.aclose())
    assert load_messages(json.dumps(doc["messages"])) == stored.messages
    assert doc["state"] == stored.state and doc["thread_id"] == thread_id


def test_export_markdown_is_a_readable_transcript(tmp_path: Path) -> None:
    thread_id, image = _seed_rich_thread(tmp_path)
    result = plait("threads", "export", thread_id, "--format", "markdown", home=tmp_path)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith(f"# Thread {thread_id}\n")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## User", "## Assistant", "## Tool result: read_file", "## Assistant"]
    assert f"*[image image/png, {len(image):,} bytes, sha256:" in text
    assert "- *[file report.pdf application/pdf, 15 bytes" in text
    assert "<details><summary>[reasoning anthropic, 24 characters]</summary>" in text
    assert "Let me look at the file." in text.split("<details>")[1].split("</details>")[0]
    call = '**Tool call** `read_file` (id `c1`):\n\n```json\n{\n  "path": "report.pdf"\n}\n```'
    assert call in text
    # The result holds a ``` fence of its own: its block is fenced with four backticks.
    assert "````text\n```python\nprint(1)\n```" in text


def test_export_to_a_missing_folder_names_it(tmp_path: Path) -> None:
    thread_id, _ = _seed_rich_thread(tmp_path)
    target = tmp_path / "nowhere" / "t.md"
    result = plait("threads", "export", thread_id, "-o", str(target), home=tmp_path)
    assert result.returncode == 2 and str(tmp_path / "nowhere") in result.stderr


def _seed_ids(home: Path, *ids: str) -> None:
    import asyncio

    from plait.messages import UserMessage
    from plait.stores.sqlite import SQLiteThreadStore

    async def seed() -> None:
        store = SQLiteThreadStore(home / "threads.sqlite3")
        for thread_id in ids:
            await store.append(thread_id, [UserMessage(f"in {thread_id}")], expected_version=0)
        await store.aclose()

    asyncio.run(seed())


@pytest.mark.parametrize("command", ["show", "export", "delete"])
def test_a_unique_prefix_names_its_thread_in_every_command(tmp_path: Path, command: str) -> None:
    _seed_ids(tmp_path, "abcd1111", "abcd2222", "ffff0000")
    result = plait("threads", command, "ABCD1", home=tmp_path)
    assert result.returncode == 0, result.stderr
    if command == "delete":
        assert "Deleted thread abcd1111 " in result.stdout
        assert "abcd1111" not in plait("threads", "list", home=tmp_path).stdout
    else:
        assert "in abcd1111" in result.stdout


@pytest.mark.parametrize("command", ["show", "export", "delete"])
def test_an_ambiguous_prefix_lists_the_candidates_and_changes_nothing(
    tmp_path: Path, command: str
) -> None:
    _seed_ids(tmp_path, "abcd1111", "abcd2222", "ffff0000")
    result = plait("threads", command, "abcd", home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert "prefix 'abcd' matches 2 threads: abcd2222, abcd1111" in message
    assert "Give more characters" in message
    listing = plait("threads", "list", home=tmp_path).stdout
    assert "abcd1111" in listing and "abcd2222" in listing


def test_a_prefix_shorter_than_four_characters_is_not_taken(tmp_path: Path) -> None:
    _seed_ids(tmp_path, "abcd1111")
    result = plait("threads", "show", "abc", home=tmp_path)
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "No thread 'abc'" in message and "at least 4 characters" in message


def test_ids_are_listed_and_shown_in_lowercase(tmp_path: Path) -> None:
    _seed_ids(tmp_path, "MixedCase42")
    listing = plait("threads", "list", home=tmp_path)
    assert listing.stdout.splitlines()[0].split()[0] == "mixedcase42", listing.stdout
    shown = plait("threads", "show", "mixedcase42", home=tmp_path)
    assert shown.returncode == 0 and "thread mixedcase42" in shown.stdout
