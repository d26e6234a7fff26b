"""The runnable examples run as written: the offline ones alone, the provider one against a local
Chat Completions server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from chat_completions import sse_answer
from wire_server import WireServer

EXAMPLES = Path(__file__).parents[1] / "examples"
FIXTURES = Path(__file__).parent / "models" / "fixtures" / "openai"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("quickstart.py", "2 + 3 = 5"),
        (
            "custom_middleware.py",
            "stored tool result: {'name': 'Ada', 'email': 'ada@example.com', 'card': '•••• 1111'}",
        ),
        ("skills_disclosure.py", "answer: The table has 2 rows."),
        ("skills_ranker.py", "first skill listed for the photo request: photo-albums"),
    ],
)
def test_offline_example_runs(script: str, expected: str) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONIOENCODING": "utf-8", "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_provider_example_runs_against_a_local_server() -> None:
    with WireServer(FIXTURES) as server:
        server._replies.append(sse_answer("Four words."))
        spec = f"openai-compatible:m@{server.url}/v1"
        result = subprocess.run(
            [sys.executable, str(EXAMPLES / "openai_agent.py"), spec],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"PYTHONIOENCODING": "utf-8", "PATH": ""},
        )
        bodies = server.bodies()
    assert result.returncode == 0, result.stderr
    assert "Four words." in result.stdout
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["word_count"]
