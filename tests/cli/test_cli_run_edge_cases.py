"""``plait run`` / ``chat`` / ``demo`` edge cases a person hits: bad flags, unknown threads,
narrow terminals and terminals that cannot print Unicode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_inprocess import Completed, run_plait
from wire_server import Reply, WireServer

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


def sse_text(text: str) -> Reply:
    """A Chat Completions stream that answers ``text`` in one chunk."""

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-review",
            "object": "chat.completion.chunk",
            "created": 1750000000,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    chunks = [chunk({"role": "assistant", "content": text}), chunk({}, "stop")]
    return Reply(200, [*chunks, b"data: [DONE]\n\n"], "text/event-stream")


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def plait(
    *args: str,
    home: Path,
    columns: int = 200,
    stdin: str | None = None,
) -> Completed:
    return run_plait(*args, home=home, columns=columns, stdin=stdin)


def plait_process(
    *args: str,
    home: Path,
    columns: int = 200,
    stdin: str | None = None,
    env_extra: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """A spawned ``plait``: for what depends on the process's own stdout encoding."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PLAIT_MODEL", "PYTHONIOENCODING")
    }
    env.update({"PLAIT_HOME": str(home), "COLUMNS": str(columns), "NO_COLOR": "1"})
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", "from plait.cli import main; main()", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=env,
        input=stdin,
        timeout=60,
        check=False,
    )


def _spec(server: WireServer) -> str:
    return f"openai-compatible:m@{server.url}/v1"


def test_run_keeps_the_thread_id_whole_on_a_narrow_terminal(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_text("Short answer."))
    result = plait("run", "hi", "--model", _spec(server), home=tmp_path, columns=30)
    assert result.returncode == 0, result.stdout + result.stderr
    ids = re.findall(r"--thread ([0-9a-f]+)", result.stdout)
    assert ids and len(ids[0]) == 32, result.stdout


def test_run_with_an_unknown_thread_says_so_and_sends_nothing(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_text("First."))
    first = plait("run", "hi", "--model", _spec(server), home=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    result = plait("run", "again", "--model", _spec(server), "--thread", "typo", home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    out = " ".join(result.stderr.split())
    assert "No thread 'typo'" in out and "plait threads list" in out
    assert len(server.received) == 1


def test_chat_with_an_unknown_thread_says_so(server: WireServer, tmp_path: Path) -> None:
    result = plait("chat", "--model", _spec(server), "--thread", "typo", home=tmp_path, stdin="")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "No thread 'typo'" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_run_with_an_empty_task_is_a_usage_error(server: WireServer, tmp_path: Path) -> None:
    result = plait("run", "  ", "--model", _spec(server), home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert server.received == []


def test_run_rejects_a_zero_token_budget_as_a_usage_error(
    server: WireServer, tmp_path: Path
) -> None:
    result = plait("run", "hi", "--model", _spec(server), "--max-input-tokens", "0", home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--max-input-tokens" in result.stderr
    assert server.received == []


def test_run_with_a_file_as_skills_folder_is_a_usage_error(
    server: WireServer, tmp_path: Path
) -> None:
    stray = tmp_path / "notes.txt"
    stray.write_text("not a skill")
    result = plait("run", "hi", "--model", _spec(server), "--skills", str(stray), home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Not a skills folder" in " ".join(result.stderr.split())
    assert server.received == []


def test_run_accepts_a_skill_md_file_as_skills(server: WireServer, tmp_path: Path) -> None:
    skill = tmp_path / "greet"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Say hello.\n---\nHello.\n")
    server._replies.append(sse_text("ok"))
    result = plait(
        "run", "hi", "--model", _spec(server), "--skills", str(skill / "SKILL.md"), home=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("spelling", ["SKILL.MD", "Skill.md"])
def test_run_accepts_a_skill_md_file_in_any_letter_case(
    server: WireServer, tmp_path: Path, spelling: str
) -> None:
    skill = tmp_path / "greet"
    skill.mkdir()
    (skill / spelling).write_text("---\nname: greet\ndescription: Say hello.\n---\nHello.\n")
    server._replies.append(sse_text("ok"))
    result = plait(
        "run", "hi", "--model", _spec(server), "--skills", str(skill / spelling), home=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Say hello." in json.dumps(server.bodies()[0])


def test_run_prints_the_trace_line_once(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_text("ok"))
    result = plait("run", "hi", "--model", _spec(server), home=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("trace: plait ui") == 1, result.stdout


def test_demo_with_a_missing_skills_folder_is_a_usage_error(tmp_path: Path) -> None:
    result = plait("demo", "--skills", str(tmp_path / "nope"), home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Skills folder not found" in " ".join(result.stderr.split())


def test_demo_on_a_terminal_that_cannot_print_unicode(tmp_path: Path) -> None:
    result = plait_process("demo", home=tmp_path, env_extra={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "UnicodeEncodeError" not in result.stderr
    assert "North sold the most" in result.stdout


def test_run_answer_with_unicode_on_an_ascii_terminal(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_text("Résumé ✓ 日本語"))
    result = plait_process(
        "run",
        "hi",
        "--model",
        _spec(server),
        home=tmp_path,
        env_extra={"PYTHONIOENCODING": "ascii"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "R?sum? ? ???" in result.stdout


def test_run_takes_a_system_prompt(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_text("Arr."))
    result = plait(
        "run",
        "hi",
        "--model",
        _spec(server),
        "--system-prompt",
        "Talk like a pirate.",
        home=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    system = server.bodies()[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Talk like a pirate.")
