"""``plait`` on real terminals (a separate process each): in a pseudo-terminal a hung server gets a
spinner with the seconds waited, then a clear error when --timeout expires, and answers render as
Markdown; on a terminal that cannot print Unicode (``PYTHONIOENCODING=ascii``) ``run`` and ``demo``
replace what they cannot print instead of failing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer
from pty_session import ANSI, PtySession
from wire_server import WireServer

__all__ = ["ANSI", "in_terminal", "plait_process"]

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def in_terminal(*args: str, home: Path) -> tuple[int, str]:
    """Run ``plait ARGS`` with stdout and stderr on a pseudo-terminal (stdin: ``/dev/null``);
    (status, text seen)."""
    with PtySession(*args, home=home, columns=100, stdin=subprocess.DEVNULL) as run:
        seen = run.read_to_end()
        return run.close(), seen


def test_a_hung_server_shows_a_spinner_then_a_clear_timeout_error(
    server: WireServer, tmp_path: Path
) -> None:
    server.stall()
    spec = f"openai-compatible:m@{server.url}/v1"
    status, seen = in_terminal("run", "hello?", "--model", spec, "--timeout", "1.5", home=tmp_path)
    assert status == 1
    assert "waiting for the model… 1 s" in seen
    assert "no complete answer within its 1.5 s deadline" in " ".join(seen.split())


def test_an_answer_is_rendered_as_markdown_with_its_tokens(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_answer("# Plan\n\n- step **one**\n- step `two`", prompt=1500))
    spec = f"openai-compatible:m@{server.url}/v1"
    status, seen = in_terminal("run", "plan it", "--model", spec, home=tmp_path)
    assert status == 0, seen
    assert "step one" in seen and "**one**" not in seen and "`two`" not in seen
    assert "in 1,500 · out 3" in seen


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


def test_demo_on_a_terminal_that_cannot_print_unicode(tmp_path: Path) -> None:
    result = plait_process("demo", home=tmp_path, env_extra={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "UnicodeEncodeError" not in result.stderr
    assert "North sold the most" in result.stdout


def test_run_answer_with_unicode_on_an_ascii_terminal(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_answer("Résumé ✓ 日本語"))
    result = plait_process(
        "run",
        "hi",
        "--model",
        f"openai-compatible:m@{server.url}/v1",
        home=tmp_path,
        env_extra={"PYTHONIOENCODING": "ascii"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "R?sum? ? ???" in result.stdout
