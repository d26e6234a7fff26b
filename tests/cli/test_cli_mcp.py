"""``plait run --mcp NAME=COMMAND``: a real stdio MCP server's tools reach the model and run."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_hostile_server import COMMAND as HOSTILE
from mcp_server import STDIO
from test_cli_run import FIXTURES, plait, sse_text
from wire_server import Reply, WireServer


def sse_tool_call(name: str, arguments: dict[str, object]) -> Reply:
    """A Chat Completions stream that asks for one tool call."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-mcp",
            "object": "chat.completion.chunk",
            "created": 1750000000,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    chunks = [chunk({"role": "assistant", "tool_calls": [call]}), chunk({}, "tool_calls")]
    return Reply(200, [*chunks, b"data: [DONE]\n\n"], "text/event-stream")


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def test_run_with_an_mcp_server_calls_its_prefixed_tool(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_tool_call("demo_echo", {"text": "from MCP"}))
    server._replies.append(sse_text("Echoed."))
    command = shlex.join(STDIO)
    model = f"openai-compatible:m@{server.url}/v1"
    result = plait(
        "run", "echo it", "--json", "--model", model, "--mcp", f"demo={command}", home=tmp_path
    )
    assert result.returncode == 0, result.stderr
    tools = {t["function"]["name"] for t in server.bodies()[0]["tools"]}
    assert {"demo_echo", "demo_weather", "demo_count"} <= tools
    events = [json.loads(line) for line in result.stdout.splitlines()]
    finished = [e for e in events if e["type"] == "tool_call_finished"]
    assert [e["result"]["data"] for e in finished] == ["from MCP"]
    assert events[-2]["output"] == "Echoed."


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mcp", "demo"], "NAME=COMMAND or NAME=URL"),
        (["--mcp", "a=x", "--mcp", "a=y"], "names the server 'a' twice"),
    ],
)
def test_bad_mcp_flags_exit_two_before_any_model_call(
    server: WireServer, tmp_path: Path, flags: list[str], message: str
) -> None:
    result = plait(
        "run", "hi", "--model", f"openai-compatible:m@{server.url}/v1", *flags, home=tmp_path
    )
    assert result.returncode == 2
    assert message in " ".join(result.stderr.split()) or message in " ".join(result.stdout.split())
    assert server.bodies() == []


def test_a_server_that_cannot_start_fails_a_one_shot_run_in_one_line(
    server: WireServer, tmp_path: Path
) -> None:
    model = f"openai-compatible:m@{server.url}/v1"
    result = plait("run", "hi", "--model", model, "--mcp", "a=/nonexistent/srv", home=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    shown = " ".join(result.stderr.split())
    assert "MCP server 'a' could not start (/nonexistent/srv):" in shown
    assert f"its log: {tmp_path / 'mcp-logs' / 'a.log'}" in shown
    assert len(lines) <= 3 and "Traceback" not in result.stderr  # one message, wrapped at most
    assert server.bodies() == []  # no model call was made
    assert "could not start: " in (tmp_path / "mcp-logs" / "a.log").read_text()


def test_a_server_that_writes_to_stderr_and_exits_logs_to_its_file_not_the_terminal(
    server: WireServer, tmp_path: Path
) -> None:
    model = f"openai-compatible:m@{server.url}/v1"
    crash = shlex.join(
        [sys.executable, "-c", "import sys; sys.stderr.write('boom-' + 'detail'); sys.exit(3)"]
    )
    result = plait("run", "hi", "--model", model, "--mcp", f"crash={crash}", home=tmp_path)
    assert result.returncode == 1
    assert "boom-detail" not in result.stdout + result.stderr
    log = tmp_path / "mcp-logs" / "crash.log"
    assert "MCP server 'crash' could not start" in " ".join(result.stderr.split())
    assert str(log) in " ".join(result.stderr.split())
    text = log.read_text()
    assert "starting: " in text and "boom-detail" in text


def test_a_working_servers_stderr_goes_to_its_log_file_shown_by_verbose(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_text("Hello."))
    model = f"openai-compatible:m@{server.url}/v1"
    chatty = shlex.join(STDIO)
    result = plait("run", "hi", "-v", "--model", model, "--mcp", f"demo={chatty}", home=tmp_path)
    assert result.returncode == 0, result.stderr
    log = tmp_path / "mcp-logs" / "demo.log"
    assert f"MCP server demo logs to {log}" in " ".join(result.stderr.split())
    assert log.read_text().startswith("[plait] ")


def test_tools_a_server_lists_badly_are_left_out_with_a_warning_and_the_run_goes_on(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_text("Hello."))
    model = f"openai-compatible:m@{server.url}/v1"
    command = shlex.join([*HOSTILE, "sanitize"])
    result = plait("run", "hi", "--model", model, "--mcp", f"bad={command}", home=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = " ".join((result.stdout + result.stderr).split())
    assert "! MCP tools of bad left out: MCP server 'bad': tools 'a.b', 'a b' both become" in shown
    assert "Hello." in shown
    sent = [t["function"]["name"] for t in server.bodies()[0]["tools"]]
    assert [name for name in sent if name.startswith("bad_")] == ["bad_echo"]


def test_mcp_content_that_cannot_be_shown_is_one_warning_line() -> None:
    import io

    from rich.console import Console

    from plait.cli.console import EventPrinter
    from plait.mcp import McpContentDropped

    out = io.StringIO()
    printer = EventPrinter(Console(file=out, width=200, no_color=True, highlight=False))
    printer(
        McpContentDropped(
            server="files",
            tool="files_shot",
            call_id="c1",
            notes=["[image (image/png, 10 bytes) left out: image bytes are not image/png]"],
        )
    )
    printer.finish()
    (line,) = out.getvalue().splitlines()
    assert line.startswith("! files.files_shot sent content that cannot be shown:")
    assert "image bytes are not image/png" in line


def test_a_server_in_the_folders_mcp_json_reaches_the_model_with_its_env_expanded(
    server: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("DEMO_PY", STDIO[0])
    entry = {"command": "${DEMO_PY}", "args": STDIO[1:], "env": {"X": "${UNSET_X:-y}"}}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"demo": entry}}))
    server._replies.append(sse_tool_call("demo_echo", {"text": "via .mcp.json"}))
    server._replies.append(sse_text("Echoed."))
    model = f"openai-compatible:m@{server.url}/v1"
    result = plait("run", "echo it", "--json", "--model", model, home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "demo_echo" in {t["function"]["name"] for t in server.bodies()[0]["tools"]}
    events = [json.loads(line) for line in result.stdout.splitlines()]
    finished = [e for e in events if e["type"] == "tool_call_finished"]
    assert [e["result"]["data"] for e in finished] == ["via .mcp.json"]
