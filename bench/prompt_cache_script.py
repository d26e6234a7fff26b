"""The scripted session ``bench/prompt_cache.py`` and ``bench/prompt_cache_deepagents.py``
share (issue 25): the ``read_report`` results (300, 1,500 or 9,000 characters, three planted
facts), the Anthropic brain (a ``read_report`` call for the turn a user message names, then a
short text after its result) and the 40-skill folder. Standard library only, so the deepagents
bench imports it from its own virtual environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FACTS = {1: "the vault code is 4417", 20: "the ferry leaves at 06:40", 40: "Mara owns the kiln"}
SIZES = (300, 1_500, 9_000)
ANSWER = "Noted; the report is read."


def report_text(turn: int) -> str:
    """The report of one turn: ``SIZES[turn % 3]`` characters, a fact first if one is planted."""
    size = SIZES[turn % len(SIZES)]
    fact = FACTS.get(turn, "")
    line = f"report {turn}: row data, nothing unusual here. "
    body = (line * (size // len(line) + 1))[:size]
    return f"{fact}. {body}" if fact else body


def turn_of(text: str) -> int:
    """The turn a user message names (``... #12``), 0 if none."""
    tail = text.rsplit("#", 1)[-1] if "#" in text else ""
    digits = "".join(c for c in tail[:6] if c.isdigit())
    return int(digits) if digits else 0


def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Anthropic wire server's answer to ``body``."""
    last = body["messages"][-1]
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if any(b.get("type") == "tool_result" for b in blocks):
        return [{"type": "text", "text": ANSWER}]
    text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    return [{"type": "tool_use", "name": "read_report", "input": {"turn": turn_of(text)}}]


def write_skill(root: Path, i: int) -> None:
    folder = root / f"skill-{i:02d}"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: skill-{i:02d}\ndescription: Handles report kind {i} with care and "
        f"checks the figures of kind {i} twice.\n---\n\nSteps for kind {i}.\n"
    )


def skills_folder(root: Path, count: int = 40) -> Path:
    """``root`` with ``count`` skills (``skill-00`` ...), one ``SKILL.md`` each."""
    for i in range(count):
        write_skill(root, i)
    return root
