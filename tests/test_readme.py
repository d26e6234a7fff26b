"""README's quickstart runs as written, and its set-up commands are the ones CI uses."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()


def test_quickstart_runs_as_written() -> None:
    block = re.search(r"## Quickstart\s+```python\n(.*?)```", README, re.S)
    assert block is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.group(1), "README-quickstart", "exec"), {})
    assert out.getvalue().strip() == "2 + 3 = 5"


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest" in README and "python -m pytest" in ci
    assert "pip install -e '.[dev]'" in README and "pip install --quiet -e '.[dev]'" in ci


def test_structured_output_example_runs_as_written() -> None:
    block = re.search(r"## Structured output.*?```python\n(.*?)```", README, re.S)
    assert block is not None
    scope: dict[str, object] = {}
    exec(compile(block.group(1), "README-structured-output", "exec"), scope)
    ticket = scope["ticket"]
    assert getattr(ticket, "title", None) == "Disk full"
