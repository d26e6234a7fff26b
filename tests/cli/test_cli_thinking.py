"""The model's thinking in ``plait run``: ``--thinking`` turns it on (``ModelSettings.reasoning``),
it is shown folded and dimmed on standard error (one line: its start and its length), streamed
with ``-v``, hidden with ``--no-thinking``; ``--temperature`` / ``--max-tokens`` reach the request;
reasoning another provider made is shown as a note. Real SDKs against local servers."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import AnthropicServer
from chat_completions import sse_answer
from cli_inprocess import empty_home
from rich.console import Console
from typer.testing import CliRunner, Result
from wire_server import WireServer

from plait.cli.app import app
from plait.cli.display import TurnDisplay, thinking_line
from plait.runtime.events import ReasoningDropped

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"
THOUGHT = "The user wants a greeting.\nI will say hello briefly."


def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if body.get("thinking", {}).get("type") == "enabled":
        blocks.append({"type": "thinking", "thinking": THOUGHT})
    blocks.append({"type": "text", "text": "Hello!"})
    return blocks


@pytest.fixture
def claude() -> Iterator[AnthropicServer]:
    with AnthropicServer(brain) as wire:
        yield wire


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return empty_home(tmp_path, monkeypatch) / "project"


def run_claude(claude: AnthropicServer, *args: str) -> Result:
    env = {"ANTHROPIC_BASE_URL": claude.url, "ANTHROPIC_API_KEY": "sk-ant-test", "COLUMNS": "200"}
    argv = ["run", *args, "--model", "anthropic:claude-sonnet-4-5", "--no-trace"]
    return CliRunner().invoke(app, argv, env=env)


def test_thinking_is_turned_on_and_shown_folded_on_stderr(
    claude: AnthropicServer, project: Path
) -> None:
    result = run_claude(claude, "say hi", "--thinking", "2048")
    assert result.exit_code == 0, result.output
    assert claude.received[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert result.stdout == "Hello!\n"  # piped: the answer only
    folded = f"thinking: The user wants a greeting. ({len(THOUGHT)} characters)"
    assert folded in result.stderr
    assert "I will say hello briefly." not in result.stderr


def test_verbose_streams_the_whole_thought(claude: AnthropicServer, project: Path) -> None:
    result = run_claude(claude, "say hi", "--thinking", "medium", "-v")
    assert result.exit_code == 0, result.output
    assert claude.received[0].body["thinking"]["type"] == "enabled"
    assert THOUGHT in result.stderr


def test_no_thinking_hides_it(claude: AnthropicServer, project: Path) -> None:
    result = run_claude(claude, "say hi", "--thinking", "2048", "--no-thinking")
    assert result.exit_code == 0, result.output
    assert "thinking" not in result.output and "Hello!" in result.stdout


def test_json_lines_carry_the_thinking_unless_hidden(
    claude: AnthropicServer, project: Path
) -> None:
    shown = run_claude(claude, "say hi", "--reasoning", "2048", "--json")
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    deltas = [e["text"] for e in events if e["type"] == "reasoning_delta_received"]
    assert "".join(deltas) == THOUGHT
    hidden = run_claude(claude, "say hi", "--reasoning", "2048", "--json", "--no-thinking")
    assert "reasoning_delta_received" not in hidden.stdout


@pytest.mark.parametrize("value", ["lots", "-5", "0"])
def test_a_bad_thinking_value_is_exit_two_before_any_call(
    claude: AnthropicServer, project: Path, value: str
) -> None:
    result = run_claude(claude, "say hi", "--thinking", value)
    assert result.exit_code == 2
    assert "--thinking takes a token budget" in result.stderr
    assert claude.received == []


def test_temperature_and_max_tokens_reach_the_request(project: Path) -> None:
    with WireServer(FIXTURES) as server:
        server._replies.append(sse_answer("Cool."))
        spec = f"openai-compatible:m@{server.url}/v1"
        argv = ["run", "hi", "-m", spec, "--temperature", "0.2", "--max-tokens", "64"]
        result = CliRunner().invoke(app, [*argv, "-s", "Be terse."])
        assert result.exit_code == 0, result.output
        body = server.bodies()[0]
    assert body["temperature"] == 0.2 and body["max_tokens"] == 64
    assert body["messages"][0] == {"role": "system", "content": "Be terse."}


def test_reasoning_another_provider_made_is_a_note() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, no_color=True)
    display = TurnDisplay(console)
    display(ReasoningDropped(dispatch=1, provider="anthropic", count=2))
    display.finish()
    assert "note: 2 reasoning part(s) from anthropic left out" in out.getvalue()


def test_the_folded_line_is_the_first_non_blank_line_cut_at_100() -> None:
    assert thinking_line("\n\n  first  \nsecond") == "thinking: first (18 characters)"
    long = thinking_line("x" * 300)
    assert long.startswith("thinking: " + "x" * 99 + "…") and "(300 characters)" in long
