"""Shared fixtures for the skills tests: writing skill folders into a temporary tree."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

SkillWriter = Callable[..., Path]


def skill_md(name: str, description: str = "Does a thing. Use when asked.", **extra: str) -> str:
    lines = ["---", f"name: {name}", f"description: {description}"]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    return "\n".join([*lines, "---", f"# {name}", "", "Instructions."]) + "\n"


@pytest.fixture
def write_skill(tmp_path: Path) -> SkillWriter:
    """``write_skill("pdf", content, files={...}, root=...)`` writes ``root/pdf/SKILL.md``
    (bytes or text, written verbatim) plus extra files, and returns the skill folder."""

    def write(
        folder: str,
        content: str | bytes | None = None,
        *,
        files: Mapping[str, str | bytes] | None = None,
        root: Path | None = None,
        filename: str = "SKILL.md",
    ) -> Path:
        base = (root or tmp_path / "skills") / folder
        base.mkdir(parents=True, exist_ok=True)
        if content is None:
            content = skill_md(Path(folder).name)
        data = content.encode("utf-8") if isinstance(content, str) else content
        (base / filename).write_bytes(data)
        for rel, body in (files or {}).items():
            target = base / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body.encode("utf-8") if isinstance(body, str) else body)
        return base

    return write


@pytest.fixture
def make_md() -> Callable[..., str]:
    """``make_md(name, description, **extra_fields)`` → a SKILL.md text."""
    return skill_md
