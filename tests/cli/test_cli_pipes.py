"""``plait`` as a separate process where the pipe or the terminal matters: piped standard output
holds the answer only (usage, tool, thread and trace lines on standard error), ``echo ... | plait
run`` reads the task from the pipe and ``/dev/null`` is not read, and ``plait chat`` on a terminal
asks before the workspace writes (y/N, default no)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import AnthropicServer
from chat_completions import sse_answer
from pty_session import DEADLINE, PtySession
from test_cli_mcp import sse_tool_call
from test_cli_terminal import plait_process
from wire_server import WireServer

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def spec(server: WireServer) -> str:
    return f"openai-compatible:m@{server.url}/v1"


def test_piped_stdin_is_the_task_and_piped_stdout_the_answer_only(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_tool_call("ls", {}))
    server._replies.append(sse_answer("Two files."))
    result = plait_process(
        "run", "--model", spec(server), home=tmp_path, stdin="how many files are here?\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Two files.\n"
    assert server.bodies()[0]["messages"][-1]["content"] == "how many files are here?\n"
    for line in ("→ ls", "✓ ls", "in 10 · out 3", "thread: ", "trace: plait ui"):
        assert line in result.stderr, line


def test_a_task_argument_with_dev_null_as_stdin_is_the_whole_task(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_answer("Hi."))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PLAIT_HOME=str(tmp_path), NO_COLOR="1")
    env.pop("PLAIT_MODEL", None)
    command = [sys.executable, "-c", "from plait.cli import main; main()"]
    result = subprocess.run(
        [*command, "run", "hello", "--model", spec(server), "--no-trace"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=DEADLINE,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hi.\n"
    assert server.bodies()[0]["messages"][-1]["content"] == "hello"


def test_chat_asks_before_a_write_and_no_is_the_default(server: WireServer, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    server._replies.append(sse_tool_call("write_file", {"path": "a.txt", "content": "A"}))
    server._replies.append(sse_answer("Wrote a."))
    server._replies.append(sse_tool_call("write_file", {"path": "b.txt", "content": "B"}))
    server._replies.append(sse_answer("Did not write b."))
    with PtySession(
        "chat", "--model", spec(server), "--no-trace", home=tmp_path, cwd=project
    ) as chat:
        chat.expect("you> ")
        chat.send("write a.txt\n")
        chat.expect("? the agent wants to write: a.txt")
        chat.expect("allow? [y/N]")
        chat.send("y\n")
        chat.expect("Wrote a.")
        assert (project / "a.txt").read_text(encoding="utf-8") == "A"
        chat.send("write b.txt\n")
        chat.expect("? the agent wants to write: b.txt")
        chat.send("\n")  # the default: no
        chat.expect("Did not write b.")
        chat.expect("you> ")
        status = chat.end()  # Ctrl-D ends the session
    assert status == 0, chat.seen[-2000:]
    assert not (project / "b.txt").exists()
    declined = [m for m in server.bodies()[3]["messages"] if m["role"] == "tool"][-1]
    assert "The user declined this write_file call" in declined["content"]


def test_thinking_on_a_terminal_is_one_folded_dim_line_before_the_answer(tmp_path: Path) -> None:
    thought = "First I consider the question.\nThen I answer it."

    def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"type": "thinking", "thinking": thought}, {"type": "text", "text": "Answer."}]

    with (
        AnthropicServer(brain) as claude,
        PtySession(
            "run",
            "q?",
            "-m",
            "anthropic:claude-sonnet-4-5",
            "--thinking",
            "1024",
            "--no-trace",
            home=tmp_path,
            extra_env={"ANTHROPIC_API_KEY": "sk-ant-x", "ANTHROPIC_BASE_URL": claude.url},
        ) as run,
    ):
        seen = run.expect("thread: ")
        assert run.close() == 0
    folded = f"thinking: First I consider the question. ({len(thought)} characters)"
    assert folded in seen
    assert seen.index(folded) < seen.index("Answer.")
    assert "Then I answer it." not in seen


def test_ctrl_c_at_the_question_cancels_the_turn_and_the_next_line_is_a_message(
    server: WireServer, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    server._replies.append(sse_tool_call("shell", {"command": "touch ran"}))
    server._replies.append(sse_answer("Next answer."))
    with PtySession(
        "chat", "--model", spec(server), "--no-trace", home=tmp_path, cwd=project
    ) as chat:
        chat.expect("you> ")
        chat.send("run something\n")
        chat.expect("? the agent wants to run: touch ran")
        chat.expect("allow? [y/N]")
        chat.process.send_signal(signal.SIGINT)
        chat.expect("turn cancelled")
        chat.expect("you> ")
        chat.send("and now?\n")
        chat.expect("Next answer.")
        chat.expect("you> ")
        status = chat.end()
    assert status == 0, chat.seen[-2000:]
    assert not (project / "ran").exists()
    assert server.bodies()[-1]["messages"][-1]["content"] == "and now?"
