"""``plait run --fallback`` and ``[subagents.NAME]`` in plait.toml."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_completions import sse_answer
from cli_inprocess import run_plait
from wire_server import WireServer

from plait.cli.config import ConfigFileError, load_settings
from plait.cli.subagents import subagents_middleware
from plait.errors import ConfigurationError
from plait.models.scripted import ScriptedModel
from plait.subagents import Subagents

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def primary() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as wire:
        yield wire


@pytest.fixture
def fallback() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as wire:
        yield wire


def test_run_moves_to_the_fallback_when_the_model_is_down(
    primary: WireServer, fallback: WireServer, tmp_path: Path
) -> None:
    for _ in range(4):  # the first attempt and the adapter's three retries
        primary.reply("server_error.json", status=503, headers={"retry-after": "0"})
    fallback._replies.append(sse_answer("From the fallback."))
    result = run_plait(
        "run",
        "hi",
        "--json",
        "--model",
        f"openai-compatible:m@{primary.url}/v1",
        "--fallback",
        f"openai-compatible:m@{fallback.url}/v1",
        home=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert "model_call_rerouted" in kinds
    assert events[-2]["output"] == "From the fallback."


def test_subagents_come_from_plait_toml(tmp_path: Path) -> None:
    (tmp_path / "research").mkdir()
    (tmp_path / "plait.toml").write_text(
        '[subagents.researcher]\ndescription = "Researches."\nsystem = "Be thorough."\n'
        'skills = ["research"]\n'
    )
    settings = load_settings(tmp_path)
    [middleware] = subagents_middleware(settings, ScriptedModel(["x"]))
    assert isinstance(middleware, Subagents)
    sub = middleware.agents["researcher"]
    assert sub.description == "Researches."
    assert not callable(sub.agent) and sub.agent.system_prompt == "Be thorough."
    [task] = middleware.tools()
    assert "researcher: Researches." in task.definition.description


def test_a_subagent_with_a_missing_skills_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "plait.toml").write_text('[subagents.x]\nskills = ["nowhere"]\n')
    with pytest.raises(ConfigurationError, match=r"\[subagents.x\] skills folder not found"):
        subagents_middleware(load_settings(tmp_path), ScriptedModel(["x"]))


def test_an_unknown_subagent_key_names_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "plait.toml").write_text('[subagents.x]\nprompt = "no"\n')
    with pytest.raises(ConfigFileError, match="known here: description, model, system, skills"):
        load_settings(tmp_path)


def test_the_terminal_shows_a_subagents_start_and_end_and_a_fallback_only() -> None:
    from io import StringIO

    from rich.console import Console

    from plait.cli.display import TurnDisplay
    from plait.errors import ProviderError
    from plait.messages import Usage
    from plait.runtime.events import (
        ModelCallRerouted,
        SubagentEventRelayed,
        TextDeltaReceived,
        TurnFinished,
        TurnStarted,
    )

    out = StringIO()
    console = Console(file=out, force_terminal=False, width=120)
    display = TurnDisplay(console, verbose=False, info=console)
    for inner in (
        TurnStarted(thread_id="t/c1", input=[]),
        TextDeltaReceived(dispatch=0, text="child text"),
        TurnFinished(output="child text", usage=Usage()),
    ):
        display(SubagentEventRelayed(name="kid", depth=1, thread_id="t/c1", event=inner))
    display(ModelCallRerouted(dispatch=0, failed="a", next="b", error=ProviderError("503 down")))
    shown = out.getvalue()
    assert "→ subagent kid started (thread t/c1)" in shown
    assert "← subagent kid answered" in shown
    assert "child text" not in shown
    assert "a failed (503 down); trying b" in shown


def sse_task(call_id: str, subagent: str, description: str, *, prompt: int, completion: int) -> Any:
    """A Chat Completions stream calling the ``task`` tool, with the given usage."""
    from wire_server import Reply

    args = json.dumps({"subagent_type": subagent, "description": description})
    call = {"index": 0, "id": call_id, "type": "function"}
    chunks = [
        {
            "role": "assistant",
            "tool_calls": [{**call, "function": {"name": "task", "arguments": args}}],
        },
        None,
    ]
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    body = []
    for delta, finish, use in (
        (chunks[0], None, None),
        (None, "tool_calls", None),
        (None, None, usage),
    ):
        choices = (
            [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if delta or finish else []
        )
        data = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1750000000,
            "model": "m",
            "choices": choices,
            "usage": use,
        }
        body.append(b"data: " + json.dumps(data).encode() + b"\n\n")
    body.append(b"data: [DONE]\n\n")
    return Reply(200, body, "text/event-stream")


def test_run_with_a_subagent_counts_the_whole_trees_usage(
    primary: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "plait.toml").write_text(
        '[subagents.researcher]\ndescription = "Researches."\nsystem = "Be thorough."\n'
    )
    monkeypatch.chdir(project)
    primary._replies.extend(
        [
            sse_task("call_1", "researcher", "Find the answer.", prompt=100, completion=5),
            sse_answer("The answer is 42.", prompt=20, completion=2),  # the subagent
            sse_answer("It is 42.", prompt=130, completion=4),
        ]
    )
    spec = f"openai-compatible:m@{primary.url}/v1"
    result = run_plait("run", "What is it?", "--model", spec, home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    shown = result.stdout + result.stderr
    assert "It is 42." in shown
    assert "in 250 · out 11" in shown  # 100 + 20 + 130 in, 5 + 2 + 4 out: the tree's
    assert "→ subagent researcher started (thread " in shown
    # The subagent got its own prompt and the task, not the parent's conversation.
    child = primary.bodies()[1]
    assert child["messages"][0] == {"role": "system", "content": "Be thorough."}
    assert child["messages"][-1]["content"] == "Find the answer."
    assert "What is it?" not in json.dumps(child)
