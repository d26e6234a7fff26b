"""``plait chat`` on a pseudo-terminal, as a person uses it: the venv's ``plait`` entry point
spawned with its standard input, output and error on one pty, against a local wire server. A
bracketed paste of two lines is one message; slash commands answer at the prompt; Ctrl-C clears
the line being typed; ``-c`` shows its recap and ``--resume`` its list before the prompt."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer
from test_cli_terminal import ANSI
from wire_server import WireServer

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"
DEADLINE = 60.0
"""Seconds the spawned ``plait`` may take to show what a test waits for."""

ENTRY_POINT = Path(sys.executable).parent / "plait"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def spec(server: WireServer) -> str:
    return f"openai-compatible:m@{server.url}/v1"


class Chat:
    """``plait chat ARGS`` on a pseudo-terminal (its stdin, stdout and stderr)."""

    def __init__(self, server: WireServer, home: Path, *args: str) -> None:
        assert ENTRY_POINT.exists(), f"no plait entry point next to {sys.executable}"
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(HOME=str(home), PLAIT_HOME=str(home / "plait"), COLUMNS="120", TERM="xterm")
        env.pop("PLAIT_MODEL", None)
        env.pop("NO_COLOR", None)
        self.primary, secondary = pty.openpty()
        command = [str(ENTRY_POINT), *args, "--model", spec(server), "--no-trace"]
        self.process = subprocess.Popen(
            command, stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=home
        )
        os.close(secondary)
        self.seen = ""
        self._position = 0

    def expect(self, text: str) -> str:
        """Read until ``text`` shows (ANSI codes removed) after what the last expect matched;
        fail after DEADLINE."""
        end = time.monotonic() + DEADLINE
        while text not in self.seen[self._position :]:
            left = end - time.monotonic()
            assert left > 0, f"never saw {text!r}; saw:\n{self.seen[-3000:]}"
            ready, _, _ = select.select([self.primary], [], [], left)
            if ready:
                try:
                    data = os.read(self.primary, 65536)
                except OSError:
                    data = b""
                assert data, f"plait ended before showing {text!r}; saw:\n{self.seen[-3000:]}"
                self.seen = ANSI.sub("", self.seen + data.decode("utf-8", "replace"))
        self._position = self.seen.index(text, self._position) + len(text)
        return self.seen

    def send(self, text: str) -> None:
        os.write(self.primary, text.encode())

    def end(self) -> int:
        """Ctrl-D at the prompt; the exit status."""
        self.send("\x04")
        status = self.process.wait(timeout=DEADLINE)
        os.close(self.primary)
        return status

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=DEADLINE)
        os.close(self.primary)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def test_a_bracketed_paste_of_two_lines_is_one_message(server: WireServer, home: Path) -> None:
    server._replies.append(sse_answer("Got both lines."))
    chat = Chat(server, home, "chat")
    try:
        chat.expect("you> ")
        chat.send("\x1b[200~line1\nline2\x1b[201~\r")
        chat.expect("Got both lines.")
        chat.expect("you> ")
        status = chat.end()
    except BaseException:
        chat.kill()
        raise
    assert status == 0, chat.seen[-2000:]
    assert len(server.bodies()) == 1
    users = [m["content"] for m in server.bodies()[0]["messages"] if m["role"] == "user"]
    assert users == ["line1\nline2"]


def test_slash_commands_answer_at_the_prompt_and_ctrl_c_clears_the_line(
    server: WireServer, home: Path
) -> None:
    server._replies.append(sse_answer("Hello there."))
    chat = Chat(server, home, "chat")
    try:
        chat.expect("you> ")
        chat.send("/help\r")
        chat.expect("/pin NAME      pin the skill NAME for the next turn")
        chat.expect("you> ")
        chat.send("/model\r")
        chat.expect(f"model: {spec(server)}")
        chat.expect("you> ")
        chat.send("/nope\r")
        chat.expect("unknown command /nope: type /help for the commands")
        chat.expect("you> ")
        chat.send("never sent")
        chat.expect("never sent")
        chat.send("\x03")  # Ctrl-C: the line is dropped, the session goes on
        chat.expect("you> ")
        chat.send("hi\r")
        chat.expect("Hello there.")
        chat.expect("you> ")
        chat.send("/usage\r")
        chat.expect("this session: 1 turn · in 10 · out 3")
        chat.expect("you> ")
        status = chat.end()
    except BaseException:
        chat.kill()
        raise
    assert status == 0, chat.seen[-2000:]
    users = [m["content"] for m in server.bodies()[0]["messages"] if m["role"] == "user"]
    assert users == ["hi"]


def test_continue_and_resume_show_the_thread_before_the_prompt(
    server: WireServer, home: Path
) -> None:
    server._replies.extend([sse_answer("First answer."), sse_answer("Resumed answer.")])
    first = Chat(server, home, "chat")
    try:
        first.expect("you> ")
        first.send("the first question\r")
        first.expect("First answer.")
        first.expect("you> ")
        assert first.end() == 0
    except BaseException:
        first.kill()
        raise
    again = Chat(server, home, "chat", "-c")
    try:
        again.expect("· 1 turn")
        again.expect("you> the first question")
        again.expect("First answer.")
        again.expect("you> ")
        assert again.end() == 0
    except BaseException:
        again.kill()
        raise
    picked = Chat(server, home, "chat", "--resume")
    try:
        picked.expect("recent threads:")
        picked.expect("1 turn  the first question")
        picked.expect("resume which? [1-1, Enter: a new thread]")
        picked.send("1\r")
        picked.expect("continuing thread")
        picked.expect("you> ")
        picked.send("and then?\r")
        picked.expect("Resumed answer.")
        picked.expect("you> ")
        assert picked.end() == 0
    except BaseException:
        picked.kill()
        raise
    users = [m["content"] for m in server.bodies()[1]["messages"] if m["role"] == "user"]
    assert users == ["the first question", "and then?"]
