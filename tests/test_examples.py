"""The runnable examples run as written (the offline ones) or at least compile (providers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "examples"


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


@pytest.mark.parametrize("script", ["openai_agent.py", "skills_embeddings.py"])
def test_example_needing_a_provider_or_a_model_compiles(script: str) -> None:
    source = (EXAMPLES / script).read_text()
    assert compile(source, script, "exec").co_filename == script
