"""``plait chat`` decides held tool calls inline (issue 26): ``--approve-all`` / ``--approve TOOL``
/ ``--deny-all`` decide what they cover, the person at a terminal approves, edits the arguments
or rejects with a message, and with nobody to ask (standard input not a terminal) the call is
rejected. A thread left paused is decided before the next message; the usage line of a resumed
turn is the whole turn's (``plait run`` too). Against a local Chat Completions wire server."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer, sse_call
from cli_inprocess import empty_home, run_plait
from wire_server import WireServer

from plait import Agent, ScriptedModel, ToolCall
from plait.runtime.pause import PENDING_KEY
from plait.stores import SQLiteThreadStore
from plait.workspace import Workspace

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"
DEADLINE = 60.0
"""Seconds a spawned ``plait chat`` may take to show what the pty test waits for."""


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return empty_home(tmp_path, monkeypatch)


def _spec(server: WireServer) -> str:
    return f"openai-compatible:m@{server.url}/v1"


def _tool_results(server: WireServer, request: int) -> list[str]:
    return [m["content"] for m in server.bodies()[request]["messages"] if m["role"] == "tool"]


def _chat(server: WireServer, home: Path, stdin: str, *flags: str) -> tuple[int, str]:
    done = run_plait("chat", "--model", _spec(server), "--no-trace", *flags, home=home, stdin=stdin)
    return done.returncode, done.stdout + done.stderr


def test_chat_approve_all_runs_the_held_write_and_shows_the_whole_turns_usage(
    server: WireServer, home: Path
) -> None:
    server._replies.append(sse_call("write_file", {"path": "a.txt", "content": "A"}))
    server._replies.append(sse_answer("Wrote a.", prompt=10, completion=3))

    status, shown = _chat(server, home, "write a.txt\n", "--approve-all")

    assert status == 0, shown
    assert (home / "project" / "a.txt").read_text() == "A"
    assert "in 25 · out 7" in shown  # the call before the pause (15/4) and the answer (10/3)
    assert "a.txt" in _tool_results(server, 1)[0]


def test_chat_deny_all_rejects_the_held_write(server: WireServer, home: Path) -> None:
    server._replies.append(sse_call("write_file", {"path": "a.txt", "content": "A"}))
    server._replies.append(sse_answer("Did not write."))

    status, shown = _chat(server, home, "write a.txt\n", "--deny-all")

    assert status == 0, shown
    assert not (home / "project" / "a.txt").exists()
    assert "rejected" in _tool_results(server, 1)[0]


def test_chat_with_nobody_at_a_terminal_rejects_what_the_flags_do_not_cover(
    server: WireServer, home: Path
) -> None:
    server._replies.append(sse_call("write_file", {"path": "a.txt", "content": "A"}))
    server._replies.append(sse_answer("Understood."))

    status, shown = _chat(server, home, "write a.txt\n", "--approve", "shell")

    assert status == 0, shown
    assert not (home / "project" / "a.txt").exists()
    [result] = _tool_results(server, 1)
    assert "nobody could be asked" in result and "--approve TOOL" in result
    assert "Approval needed" not in shown  # nobody was asked: standard input is a pipe


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


def test_a_thread_left_paused_is_decided_before_the_next_message(
    server: WireServer, home: Path
) -> None:
    project = home / "project"
    store = project / "threads.db"
    _pause(store, project)
    server._replies.append(sse_answer("Wrote out.txt."))
    server._replies.append(sse_answer("Next answer."))

    status, shown = _chat(
        server, home, "and now?\n", "--store", str(store), "--thread", "0123", "--approve-all"
    )

    assert status == 0, shown
    assert "paused turn" in shown and "Next answer." in shown
    assert "is paused: tool call" not in shown  # decided, not refused with ThreadPaused
    assert (project / "out.txt").read_text() == "hi"
    assert "out.txt" in _tool_results(server, 0)[0]
    assert server.bodies()[1]["messages"][-1]["content"] == "and now?"

    async def state() -> dict[str, object]:
        s = SQLiteThreadStore(store)
        loaded = (await s.load("0123abcd")).state
        await s.aclose()
        return loaded

    assert PENDING_KEY not in asyncio.run(state())


def test_run_shows_the_usage_of_the_whole_paused_and_resumed_turn(
    server: WireServer, home: Path
) -> None:
    server._replies.append(sse_call("write_file", {"path": "a.txt", "content": "A"}, 20, 5))
    server._replies.append(sse_answer("Wrote a.", prompt=30, completion=2))

    done = run_plait(
        "run", "write a.txt", "--model", _spec(server), "--no-trace", "--approve-all", home=home
    )

    assert done.returncode == 0, done.stderr
    assert "in 50 · out 7" in done.stdout + done.stderr


class Terminal:
    """A spawned ``plait`` on a pseudo-terminal (stdin, stdout and stderr)."""

    def __init__(self, *args: str, home: Path, cwd: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(HOME=str(home), PLAIT_HOME=str(home / "plait"), COLUMNS="160", TERM="dumb")
        env["NO_COLOR"] = "1"
        env.pop("PLAIT_MODEL", None)
        self.primary, secondary = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from plait.cli import main; main()", *args],
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            env=env,
            cwd=cwd,
        )
        os.close(secondary)
        self.seen = ""
        self._position = 0

    def expect(self, text: str) -> None:
        """Read until ``text`` shows after what the last expect matched; fail after DEADLINE."""
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
                self.seen += data.decode("utf-8", "replace").replace("\r", "")
        self._position = self.seen.index(text, self._position) + len(text)

    def send(self, text: str) -> None:
        os.write(self.primary, text.encode())

    def close(self, *, kill: bool = False) -> int:
        if kill:
            self.process.kill()
        status = self.process.wait(timeout=DEADLINE)
        os.close(self.primary)
        return status


def test_at_a_terminal_chat_asks_inline_to_approve_edit_or_reject_with_a_message(
    server: WireServer, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    server._replies.append(sse_call("write_file", {"path": "a.txt", "content": "A"}))
    server._replies.append(sse_answer("Wrote b instead."))
    server._replies.append(sse_call("write_file", {"path": "c.txt", "content": "C"}))
    server._replies.append(sse_answer("Left c alone."))
    server._replies.append(sse_call("write_file", {"path": "d.txt", "content": "D"}))
    server._replies.append(sse_answer("Wrote d."))
    args = ("chat", "--model", _spec(server), "--no-trace", "--approve", "shell")
    chat = Terminal(*args, home=tmp_path, cwd=project)
    try:
        chat.expect("you> ")
        chat.send("write a.txt\n")
        chat.expect("Approval needed: write_file")
        chat.expect('"path": "a.txt"')
        chat.expect("[a]pprove, [e]dit, [r]eject")
        chat.send("e\n")
        chat.expect("arguments as one JSON object: ")
        chat.send('{"path": "b.txt", "content": "B"}\n')
        chat.expect("Wrote b instead.")
        chat.expect("you> ")
        chat.send("write c.txt\n")
        chat.expect("[a]pprove, [e]dit, [r]eject")
        chat.send("r\n")
        chat.expect("message for the model")
        chat.send("not c, it is read-only\n")
        chat.expect("Left c alone.")
        chat.expect("you> ")
        chat.send("write d.txt\n")
        chat.expect("[a]pprove, [e]dit, [r]eject")
        chat.send("a\n")
        chat.expect("Wrote d.")
        chat.expect("you> ")
        chat.send("\x04")
    except BaseException:
        chat.close(kill=True)
        raise
    assert chat.close() == 0, chat.seen[-2000:]
    assert not (project / "a.txt").exists() and (project / "b.txt").read_text() == "B"
    assert not (project / "c.txt").exists() and (project / "d.txt").read_text() == "D"
    assert _tool_results(server, 3)[-1] == "not c, it is read-only"
    edited = server.bodies()[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(edited) == {"path": "b.txt", "content": "B"}


def test_run_on_a_paused_thread_says_how_to_decide_it(server: WireServer, home: Path) -> None:
    project = home / "project"
    store = project / "threads.db"
    _pause(store, project)

    done = run_plait(
        "run",
        "go on",
        "--model",
        _spec(server),
        "--store",
        str(store),
        "--thread",
        "0123abcd",
        home=home,
    )

    assert done.returncode == 1
    assert "plait threads resume 0123abcd" in done.stderr
    assert not server.bodies()  # the model was never called
    assert not (project / "out.txt").exists()


def test_require_approval_holds_a_tool_that_is_free_otherwise(
    server: WireServer, home: Path
) -> None:
    (home / "project" / "notes.txt").write_text("secret")
    server._replies.append(sse_call("read_file", {"path": "notes.txt"}))
    server._replies.append(sse_answer("Could not read it."))
    server._replies.append(sse_call("read_file", {"path": "notes.txt"}))
    server._replies.append(sse_answer("Read it."))

    denied = run_plait(
        "run", "read notes", "--model", _spec(server), "--no-trace",
        "--require-approval", "read_*", "--deny-all", home=home,
    )  # fmt: skip
    approved = run_plait(
        "run", "read notes", "--model", _spec(server), "--no-trace",
        "--require-approval", "read_*", "--approve", "read_file", home=home,
    )  # fmt: skip

    assert denied.returncode == 0 and approved.returncode == 0, denied.stderr + approved.stderr
    [rejected] = _tool_results(server, 1)
    assert "rejected" in rejected.lower() and "secret" not in rejected
    assert "secret" in _tool_results(server, 3)[0]
