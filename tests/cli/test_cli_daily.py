"""``plait run`` for daily use, in-process against a local wire server: -c/--continue, tokens and
cost, retry lines, clear errors, threads list, config pass-through, --model help."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer
from cli_inprocess import empty_home
from typer.testing import CliRunner, Result
from wire_server import WireServer

from plait.cli.app import app
from plait.models.registry import MODEL_SPEC_FORMS

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder; $HOME and $PLAIT_HOME empty; no provider keys."""
    return empty_home(tmp_path, monkeypatch) / "project"


def plait(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def spec(server: WireServer) -> str:
    return f"openai-compatible:test-model@{server.url}/v1"


def sent_texts(server: WireServer, index: int) -> list[tuple[str, str]]:
    messages = server.bodies()[index]["messages"]
    return [(m["role"], m["content"]) for m in messages if m["role"] != "system"]


def test_tokens_and_cost_after_the_turn_when_the_config_prices_the_model(
    server: WireServer, project: Path
) -> None:
    (project / "plait.toml").write_text(
        f'model = "{spec(server)}"\n[prices.test-model]\ninput = 1.0\noutput = 2.0\n'
        "cache_read = 0.1\n",
        encoding="utf-8",
    )
    server._replies.append(sse_answer("Done.", prompt=1234, completion=56, cached=1000))
    result = plait("run", "go")
    assert result.exit_code == 0, result.output
    assert "Done." in result.output
    assert "in 1,234 · out 56 · cached 1,000 (81%) · $0.0004 (saved $0.0009)" in result.output


def test_continue_resumes_the_most_recent_thread(server: WireServer, project: Path) -> None:
    server._replies.extend([sse_answer("A1."), sse_answer("B1."), sse_answer("B2.")])
    assert plait("run", "thread A", "--model", spec(server)).exit_code == 0
    assert plait("run", "thread B", "--model", spec(server)).exit_code == 0
    result = plait("run", "more on B", "-c", "--model", spec(server))
    assert result.exit_code == 0, result.output
    assert sent_texts(server, 2) == [
        ("user", "thread B"),
        ("assistant", "B1."),
        ("user", "more on B"),
    ]
    listing = plait("threads", "list")
    assert listing.exit_code == 0, listing.output
    lines = listing.output.splitlines()
    assert spec(server) in lines[0] and "2 turns" in lines[0] and "today" in lines[0]
    assert lines[1].strip() == "thread B"
    assert "1 turn" in lines[2] and lines[3].strip() == "thread A"


def test_continue_without_any_thread_and_with_thread_are_usage_errors(
    server: WireServer, project: Path
) -> None:
    alone = plait("run", "hi", "-c", "--model", spec(server))
    assert alone.exit_code == 2 and "no conversation to continue" in alone.output
    both = plait("run", "hi", "-c", "--thread", "abc", "--model", spec(server))
    assert both.exit_code == 2 and "not both" in both.output
    assert server.bodies() == []


def test_each_retry_is_a_line(server: WireServer, project: Path) -> None:
    for _ in range(2):
        server.reply("rate_limit.json", status=429, headers={"retry-after-ms": "10"})
    server._replies.append(sse_answer("Finally."))
    result = plait("run", "hi", "--model", spec(server))
    assert result.exit_code == 0, result.output
    assert "rate limited, retrying in 0.0 s (1/3)" in result.output
    assert "rate limited, retrying in 0.0 s (2/3)" in result.output
    assert "Finally." in result.output


def test_json_lines_report_each_retry(server: WireServer, project: Path) -> None:
    server.reply("rate_limit.json", status=429, headers={"retry-after-ms": "10"})
    server._replies.append(sse_answer("Finally."))
    result = plait("run", "hi", "--json", "--model", spec(server))
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    retries = [line for line in lines if line["type"] == "model_call_retried"]
    assert [(r["status"], r["retry"], r["max_retries"]) for r in retries] == [(429, 1, 3)]


def test_timeout_bounds_a_hung_model_call_with_a_clear_error(
    server: WireServer, project: Path
) -> None:
    server.stall()
    result = plait("run", "hi", "--timeout", "0.5", "--model", spec(server))
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "no complete answer within its 0.5 s deadline" in text and "--timeout" in text
    assert "ModelTimeouts" not in text  # a library-only setting


def test_config_timeout_applies_when_no_flag_is_given(server: WireServer, project: Path) -> None:
    (project / "plait.toml").write_text(f'model = "{spec(server)}"\ntimeout = 0.5\n')
    server.stall()
    result = plait("run", "hi")
    assert result.exit_code == 1
    assert "within its 0.5 s deadline" in " ".join(result.output.split())


def test_server_text_in_an_error_is_never_markup_or_emoji(
    server: WireServer, project: Path
) -> None:
    message = "Bad value, see https://example.com/a:x:b and [bold]docs[/bold] :thumbs_up:"
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    server.reply_json({"error": error}, status=400)
    result = plait("run", "hi", "--model", spec(server))
    assert result.exit_code == 1
    assert "https://example.com/a:x:b and [bold]docs[/bold] :thumbs_up:" in result.output


def test_the_overflow_error_suggests_only_what_the_cli_can_change(
    server: WireServer, project: Path
) -> None:
    server.reply("context_length_exceeded.json", status=400)
    result = plait("run", "hi", "--model", spec(server))
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "--max-input-tokens" in text and "--model" in text
    for library_only in (
        "keep_messages",
        "ResultEvictionMiddleware",
        "SummarizationMiddleware",
        "max_tokens",
    ):
        assert library_only not in text


def test_configured_mcp_servers_reach_the_agent_and_one_that_cannot_start_fails_the_run(
    server: WireServer, project: Path
) -> None:
    """``[mcp.*]`` servers reach the agent: one that cannot start fails a one-shot run (exit 1)
    before any model call, in one message naming the server, its command and its log."""
    (project / "plait.toml").write_text(
        '[mcp.files]\ncommand = "plait-test-no-such-mcp-server"\n', encoding="utf-8"
    )
    result = plait("run", "hi", "--model", spec(server))
    assert result.exit_code == 1, result.output
    shown = " ".join(result.output.split())
    assert "MCP server 'files' could not start (plait-test-no-such-mcp-server)" in shown
    assert "mcp-logs/files.log" in shown
    assert server.bodies() == []


def test_a_bad_config_file_stops_run_with_its_name(project: Path) -> None:
    (project / "plait.toml").write_text("timeout = -3\n", encoding="utf-8")
    result = plait("run", "hi")
    assert result.exit_code == 2
    assert "plait.toml: key 'timeout'" in result.output


@pytest.mark.parametrize("command", ["run", "chat"])
def test_model_help_shows_every_spec_form_whole_in_80_columns(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    for form in MODEL_SPEC_FORMS:
        assert any(form in line for line in lines), form


def test_chat_continue_picks_up_the_latest_thread_and_reports_tokens_each_turn(
    server: WireServer, project: Path
) -> None:
    server._replies.extend([sse_answer("First."), sse_answer("Again.", prompt=20)])
    assert plait("run", "start here", "--model", spec(server)).exit_code == 0
    result = CliRunner().invoke(
        app,
        ["chat", "-c", "--model", spec(server)],
        input="and then?\n/exit\n",
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert sent_texts(server, 1) == [
        ("user", "start here"),
        ("assistant", "First."),
        ("user", "and then?"),
    ]
    assert "Again." in result.output and "in 20 · out 3" in result.output


@pytest.mark.parametrize(("flag", "rendered"), [(None, False), ("--markdown", True)])
def test_piped_answers_are_plain_unless_markdown_is_asked_for(
    server: WireServer, project: Path, flag: str | None, rendered: bool
) -> None:
    server._replies.append(sse_answer("Use **bold** here."))
    result = plait("run", "hi", "--model", spec(server), *([flag] if flag else []))
    assert result.exit_code == 0, result.output
    assert ("Use bold here." in result.output) is rendered
    assert ("Use **bold** here." in result.output) is not rendered


def test_the_config_store_is_where_run_writes_and_threads_lists(
    server: WireServer, project: Path
) -> None:
    (project / "plait.toml").write_text('store = "data/threads.sqlite3"\n', encoding="utf-8")
    (project / "data").mkdir()
    server._replies.append(sse_answer("Kept."))
    assert plait("run", "keep this", "--model", spec(server)).exit_code == 0
    assert (project / "data" / "threads.sqlite3").exists()
    listing = plait("threads", "list")
    assert listing.exit_code == 0 and "keep this" in listing.output


def test_a_missing_configured_skills_folder_names_the_config_file(project: Path) -> None:
    (project / "plait.toml").write_text(
        'model = "openai-compatible:m@http://127.0.0.1:9/v1"\nskills = ["gone"]\n',
        encoding="utf-8",
    )
    result = plait("run", "hi")
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert f"Skills folder not found: {project / 'gone'}" in text
    assert f"(skills from {project / 'plait.toml'})" in text
