"""``plait chat`` in this process with piped standard input (a line per message), against a local
wire server: every slash command, ``//``, an unknown command, the recap of a continued thread,
``--resume`` (from the list and by prefix), and the pure helpers of :mod:`plait.cli.slash` and
:mod:`plait.cli.chat_threads`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from chat_completions import sse_answer
from cli_inprocess import Completed, empty_home, run_plait
from wire_server import WireServer

from plait.cli.chat_threads import age, pick, recap_lines
from plait.cli.slash import Slash, model_spec_for, read_line
from plait.errors import ConfigurationError
from plait.messages import AssistantMessage, Message, UserMessage
from plait.stores.base import ThreadSnapshot

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"
THREAD = re.compile(r"thread: ([0-9a-f]{32})")


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return empty_home(tmp_path, monkeypatch) / "plait-home"


def spec(server: WireServer, model: str = "m") -> str:
    return f"openai-compatible:{model}@{server.url}/v1"


def chat(server: WireServer, home: Path, lines: str, *args: str) -> Completed:
    result = run_plait("chat", "--model", spec(server), "--no-trace", *args, home=home, stdin=lines)
    return result


def sent(server: WireServer, index: int = -1) -> list[tuple[str, Any]]:
    """The (role, content) of the messages of request ``index``, the system prompt left out."""
    body = server.bodies()[index]
    return [(m["role"], m.get("content")) for m in body["messages"] if m["role"] != "system"]


def first_thread(server: WireServer, home: Path, *questions: str) -> str:
    """A thread of ``questions`` (one ``plait run`` each), answered ``answer N``; its id."""
    thread = ""
    for number, question in enumerate(questions, 1):
        server._replies.append(sse_answer(f"answer {number}"))
        more = ("--thread", thread) if thread else ()
        done = run_plait(
            "run", question, "--model", spec(server), "--no-trace", *more, home=home, stdin=""
        )
        assert done.returncode == 0, done.stderr
        found = THREAD.search(done.stderr)
        assert found is not None, done.stderr
        thread = found.group(1)
    return thread


def test_help_lists_every_command(server: WireServer, home: Path) -> None:
    result = chat(server, home, "/help\n")
    assert result.returncode == 0, result.stderr
    for command in ("/help", "/model [NAME]", "/clear", "/thread [ID]", "/skills", "/pin NAME"):
        assert command in result.stderr, command
    assert "/usage" in result.stderr and "/exit" in result.stderr and "//TEXT" in result.stderr
    assert server.bodies() == []


def test_an_unknown_command_is_one_line_naming_help_and_sends_nothing(
    server: WireServer, home: Path
) -> None:
    result = chat(server, home, "/xyz now\n")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "/xyz" in line]
    assert lines == ["unknown command /xyz: type /help for the commands"]
    assert server.bodies() == []


def test_a_double_slash_sends_a_literal_slash(server: WireServer, home: Path) -> None:
    server._replies.append(sse_answer("It is the hosts file."))
    result = chat(server, home, "//etc/hosts: what is it?\n")
    assert result.returncode == 0, result.stderr
    assert sent(server) == [("user", "/etc/hosts: what is it?")]


def test_exit_ends_the_session_before_the_next_line(server: WireServer, home: Path) -> None:
    result = chat(server, home, "/exit\nnever sent\n")
    assert result.returncode == 0, result.stderr
    assert server.bodies() == []


def test_model_shows_then_switches_the_model_for_the_next_turns(
    server: WireServer, home: Path
) -> None:
    server._replies.extend([sse_answer("From m."), sse_answer("From other.")])
    result = chat(server, home, "/model\nfirst\n/model other\n/model\nsecond\n")
    assert result.returncode == 0, result.stderr
    assert f"model: {spec(server)}\n" in result.stderr
    assert f"model: {spec(server, 'other')} (for the next turns)" in result.stderr
    assert f"model: {spec(server, 'other')}\n" in result.stderr
    assert [b["model"] for b in server.bodies()] == ["m", "other"]
    assert sent(server) == [("user", "first"), ("assistant", "From m."), ("user", "second")]


def test_model_with_a_spec_that_does_not_resolve_keeps_the_model(
    server: WireServer, home: Path
) -> None:
    server._replies.append(sse_answer("Still m."))
    result = chat(server, home, "/model anthropic:claude-sonnet-4-5\nhi\n")
    assert result.returncode == 0, result.stderr
    assert "needs an API key: set ANTHROPIC_API_KEY" in result.stderr
    assert [b["model"] for b in server.bodies()] == ["m"]


def test_clear_starts_a_new_thread_and_says_its_id(server: WireServer, home: Path) -> None:
    server._replies.extend([sse_answer("One."), sse_answer("Two.")])
    result = chat(server, home, "first\n/clear\nsecond\n")
    assert result.returncode == 0, result.stderr
    new = re.search(r"new thread: ([0-9a-f]{32})", result.stderr)
    assert new is not None, result.stderr
    assert sent(server) == [("user", "second")]
    assert result.stderr.rstrip().endswith(f"thread: {new.group(1)}")


def test_thread_shows_the_id_then_switches_by_a_prefix(server: WireServer, home: Path) -> None:
    earlier = first_thread(server, home, "earlier question")
    server._replies.append(sse_answer("Continued."))
    result = chat(server, home, f"/thread\n/thread {earlier[:6].upper()}\nlater\n/thread\n")
    assert result.returncode == 0, result.stderr
    shown = re.findall(r"^thread: ([0-9a-f]{32})", result.stderr, re.M)
    assert shown[0] != earlier
    assert f"thread: {earlier} (1 turn)" in result.stderr
    assert shown[1:] == [earlier] * 3  # the switch, /thread after it, the last line
    assert sent(server) == [
        ("user", "earlier question"),
        ("assistant", "answer 1"),
        ("user", "later"),
    ]


def test_thread_with_an_unknown_prefix_keeps_the_thread(server: WireServer, home: Path) -> None:
    result = chat(server, home, "/thread ffffffff\n")
    assert result.returncode == 0, result.stderr
    assert "No thread 'ffffffff' in the thread store" in result.stderr
    assert "/clear for a new thread" in result.stderr


def _skills(root: Path) -> Path:
    for name, text in (("house-style", "Write short sentences."), ("testing", "Test first.")):
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: How we do {name}.\n---\n{text}\n", encoding="utf-8"
        )
    return root


def test_skills_and_pin_put_a_skill_in_the_next_turn(
    server: WireServer, home: Path, tmp_path: Path
) -> None:
    folder = _skills(tmp_path / "skills")
    server._replies.extend([sse_answer("Short."), sse_answer("Again.")])
    lines = "/skills\n/pin house-style\n/skills\nwrite it\n/skills\nagain\n"
    result = chat(server, home, lines, "--skills", str(folder), "--no-default-skills")
    assert result.returncode == 0, result.stderr
    listed = [line for line in result.stderr.splitlines() if line.startswith("house-style")]
    assert len(listed) == 3, result.stderr
    assert "[" not in listed[0] and "How we do house-style." in listed[0]
    assert "[pinned]" in listed[1]
    assert "[loaded]" in listed[2] and "pinned" not in listed[2]
    assert "pinned house-style for the next turn" in result.stderr
    first = sent(server, 0)
    assert any(role == "user" and "Write short sentences." in str(c) for role, c in first)
    assert ("user", "write it") in first
    second = sent(server, 1)  # the pin stays in the thread, and is not sent twice
    assert sum("Write short sentences." in str(c) for _, c in second) == 1


def test_pin_of_an_unknown_skill_names_the_known_ones(
    server: WireServer, home: Path, tmp_path: Path
) -> None:
    folder = _skills(tmp_path / "skills")
    result = chat(server, home, "/pin nope\n/pin\n", "--skills", str(folder), "--no-default-skills")
    assert result.returncode == 0, result.stderr
    assert "no skill 'nope' to pin; skills: house-style, testing" in result.stderr
    assert "usage: /pin NAME (see /skills)" in result.stderr
    assert server.bodies() == []


def test_skills_without_any_says_how_to_add_them(server: WireServer, home: Path) -> None:
    result = chat(server, home, "/skills\n", "--no-default-skills")
    assert result.returncode == 0, result.stderr
    assert "no skills (add a folder with --skills" in result.stderr


def test_usage_adds_up_the_session_with_its_cost(server: WireServer, home: Path) -> None:
    server._replies.extend([sse_answer("A.", prompt=1000, completion=100), sse_answer("B.")])
    model = spec(server, "gpt-4.1-mini")
    result = run_plait(
        "chat", "--model", model, "--no-trace", home=home, stdin="/usage\none\ntwo\n/usage\n"
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("this session")]
    assert lines[0] == "this session: 0 turns · in 0 · out 0 · $0.0000"
    assert lines[1].startswith("this session: 2 turns · in 1,010 · out 103 · $0.00")


def test_usage_without_a_known_price_says_so(server: WireServer, home: Path) -> None:
    server._replies.append(sse_answer("A."))
    result = chat(server, home, "one\n/usage\n")
    assert result.returncode == 0, result.stderr
    assert (
        f"this session: 1 turn · in 10 · out 3 (no price known for {spec(server)}: cost not "
        "shown)" in result.stderr
    )


def test_continue_shows_a_recap_of_the_thread(server: WireServer, home: Path) -> None:
    thread = first_thread(server, home, "first question", "second question")
    result = chat(server, home, "", "-c")
    assert result.returncode == 0, result.stderr
    recap = result.stderr.split(f"continuing thread {thread} · 2 turns\n", 1)[1]
    assert recap.startswith(
        "  you> first question\n  answer 1\n  you> second question\n  answer 2\n"
    )


def test_resume_lists_threads_and_continues_the_one_picked(server: WireServer, home: Path) -> None:
    older = first_thread(server, home, "the older one")
    newer = first_thread(server, home, "the newer one")
    server._replies.append(sse_answer("Back to it."))
    result = chat(server, home, "2\nand now?\n", "--resume")
    assert result.returncode == 0, result.stderr
    listing = result.stderr.split("recent threads:\n", 1)[1].splitlines()
    assert listing[0].startswith(f"1. {newer[:8]}") and "1 turn" in listing[0]
    assert listing[0].endswith("the newer one") and "ago" in listing[0]
    assert listing[1].startswith(f"2. {older[:8]}") and listing[1].endswith("the older one")
    assert f"continuing thread {older} · 1 turn" in result.stderr
    assert sent(server)[0] == ("user", "the older one")


def test_resume_with_an_id_continues_it_at_once(server: WireServer, home: Path) -> None:
    thread = first_thread(server, home, "kept question")
    server._replies.append(sse_answer("Yes."))
    result = chat(server, home, "more\n", "--resume", thread[:5])
    assert result.returncode == 0, result.stderr
    assert "recent threads" not in result.stderr
    assert f"continuing thread {thread} · 1 turn" in result.stderr
    assert sent(server)[0] == ("user", "kept question")


def test_resume_enter_starts_a_new_thread_and_a_bad_number_is_a_usage_error(
    server: WireServer, home: Path
) -> None:
    first_thread(server, home, "only one")
    server._replies.append(sse_answer("Fresh."))
    fresh = chat(server, home, "\nhello\n", "--resume")
    assert fresh.returncode == 0, fresh.stderr
    assert sent(server) == [("user", "hello")]
    bad = chat(server, home, "7\n", "--resume")
    assert bad.returncode == 2
    assert "Pick a thread by its number, 1 to 2, not '7'" in bad.stderr


def test_resume_misuse_is_a_usage_error(server: WireServer, home: Path) -> None:
    none = chat(server, home, "", "--resume")
    assert none.returncode == 2 and "There is no thread to resume yet" in none.stderr
    both = chat(server, home, "", "--resume", "-c")
    assert both.returncode == 2 and "not two" in both.stderr
    stray = chat(server, home, "", "hello")
    assert stray.returncode == 2 and "an ID goes with --resume" in stray.stderr


def test_read_line_tells_commands_from_messages() -> None:
    assert read_line("  \n") is None
    assert read_line("/MODEL  gpt-4o ") == Slash("model", "gpt-4o")
    assert read_line("/help") == Slash("help")
    assert read_line("/pin\nhouse-style") == Slash("pin", "house-style")
    assert read_line("/") == Slash("")
    assert read_line("//x y") == "/x y"
    assert read_line("line1\nline2\n") == "line1\nline2"


def test_model_spec_for_keeps_the_provider_and_base_url() -> None:
    assert model_spec_for("openai:gpt-4.1", "gpt-4.1-mini") == "openai:gpt-4.1-mini"
    local = "openai-compatible:llama@http://localhost:11434/v1"
    assert (
        model_spec_for(local, "qwen3:8b") == "openai-compatible:qwen3:8b@http://localhost:11434/v1"
    )
    assert model_spec_for(local, "anthropic:claude-x") == "anthropic:claude-x"
    assert model_spec_for("weird", "x") == "x"


def test_recap_age_and_pick_helpers() -> None:
    history: list[Message] = []
    for n in range(5):
        history += [UserMessage(content=f"q{n}"), AssistantMessage(content="a")]
    lines = recap_lines(ThreadSnapshot("ABCDEF", history), exchanges=2)
    assert lines == [
        "continuing thread abcdef · 5 turns",
        "  … 3 earlier",
        *("  you> q3", "  a", "  you> q4", "  a"),
    ]
    now = datetime(2026, 1, 2, tzinfo=UTC)
    assert age((now - timedelta(minutes=5)).isoformat(), now) == "5m ago"
    assert age((now - timedelta(days=2)).isoformat(), now) == "2d ago"
    assert age(None, now) == "-"
    assert pick("2", 3) == 1 and pick(" ", 3) is None
    with pytest.raises(ConfigurationError, match="1 to 3"):
        pick("0", 3)


def test_pin_in_managed_mode_says_where_it_works(
    server: WireServer, home: Path, tmp_path: Path
) -> None:
    folder = _skills(tmp_path / "skills")
    args = ("--skills", str(folder), "--no-default-skills", "--mode", "managed")
    result = chat(server, home, "/pin house-style\n", *args)
    assert result.returncode == 0, result.stderr
    assert "/pin works in disclosure mode (--mode disclosure)" in result.stderr


def test_quit_and_question_mark_are_exit_and_help(server: WireServer, home: Path) -> None:
    result = chat(server, home, "/?\n/QUIT\nnever sent\n")
    assert result.returncode == 0, result.stderr
    assert "/pin NAME" in result.stderr and "unknown command" not in result.stderr
    assert server.bodies() == []


def test_clear_drops_the_pins_and_a_skill_pinned_twice_is_sent_once(
    server: WireServer, home: Path, tmp_path: Path
) -> None:
    folder = _skills(tmp_path / "skills")
    server._replies.extend([sse_answer("Pinned."), sse_answer("Plain.")])
    lines = "/pin testing\n/pin testing\n/skills\nfirst\n/pin house-style\n/clear\nsecond\n"
    result = chat(server, home, lines, "--skills", str(folder), "--no-default-skills")
    assert result.returncode == 0, result.stderr
    assert "pins dropped: house-style" in result.stderr
    first = sent(server, 0)
    assert sum("Test first." in str(c) for _, c in first) == 1
    assert sent(server, 1) == [("user", "second")]  # a new thread, and no pin in it
