"""``plait chat`` on a pseudo-terminal, as a person uses it: the venv's ``plait`` entry point
spawned with its standard input, output and error on one pty, against a local wire server. A
bracketed paste of two lines is one message; slash commands answer at the prompt; Ctrl-C clears
the line being typed; ``-c`` shows its recap and ``--resume`` its list before the prompt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer
from pty_session import DEADLINE, ENTRY_POINT, PtySession
from wire_server import WireServer

__all__ = ["DEADLINE", "ENTRY_POINT", "Chat", "spec"]

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def spec(server: WireServer) -> str:
    return f"openai-compatible:m@{server.url}/v1"


class Chat(PtySession):
    """``plait ARGS --model SERVER --no-trace`` from the venv's entry point on a pseudo-terminal
    (its stdin, stdout and stderr), in ``home``."""

    def __init__(self, server: WireServer, home: Path, *args: str) -> None:
        command = [*args, "--model", spec(server), "--no-trace"]
        super().__init__(*command, home=home, entry_point=True)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def test_a_bracketed_paste_of_two_lines_is_one_message(server: WireServer, home: Path) -> None:
    server._replies.append(sse_answer("Got both lines."))
    with Chat(server, home, "chat") as chat:
        chat.expect("you> ")
        chat.send("\x1b[200~line1\nline2\x1b[201~\r")
        chat.expect("Got both lines.")
        chat.expect("you> ")
        status = chat.end()
    assert status == 0, chat.seen[-2000:]
    assert len(server.bodies()) == 1
    users = [m["content"] for m in server.bodies()[0]["messages"] if m["role"] == "user"]
    assert users == ["line1\nline2"]


def test_slash_commands_answer_at_the_prompt_and_ctrl_c_clears_the_line(
    server: WireServer, home: Path
) -> None:
    server._replies.append(sse_answer("Hello there."))
    with Chat(server, home, "chat") as chat:
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
    assert status == 0, chat.seen[-2000:]
    users = [m["content"] for m in server.bodies()[0]["messages"] if m["role"] == "user"]
    assert users == ["hi"]


def test_continue_and_resume_show_the_thread_before_the_prompt(
    server: WireServer, home: Path
) -> None:
    server._replies.extend([sse_answer("First answer."), sse_answer("Resumed answer.")])
    with Chat(server, home, "chat") as first:
        first.expect("you> ")
        first.send("the first question\r")
        first.expect("First answer.")
        first.expect("you> ")
        assert first.end() == 0
    with Chat(server, home, "chat", "-c") as again:
        again.expect("· 1 turn")
        again.expect("you> the first question")
        again.expect("First answer.")
        again.expect("you> ")
        assert again.end() == 0
    with Chat(server, home, "chat", "--resume") as picked:
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
    users = [m["content"] for m in server.bodies()[1]["messages"] if m["role"] == "user"]
    assert users == ["the first question", "and then?"]
