"""Inferring a description from a SKILL.md body that lacks one.

:func:`first_paragraph` returns the first *prose* paragraph of the Markdown body. It skips
headings, code fences, HTML comments and tags, horizontal rules (``---``, ``***``, ``___``),
tables, badge lines and lines that hold only links or images; a paragraph that is only a list,
a field list of bold labels (``**Name**: pdf-tools **Tier**: BASIC``, one field a line or
several on one), or sits under a heading such as "Prerequisites", is used only when the body has
no prose at all. One bold label before a sentence (``**Note**: this skill merges PDFs.``) is
prose.
"""

from __future__ import annotations

import re

from plait.skills.rules import MAX_DESCRIPTION_LENGTH

__all__ = ["first_paragraph"]

_FENCE = re.compile(r"^(```|~~~)")
_RULE = re.compile(r"^([-*_])(\s*\1){2,}\s*$")
_LIST_ITEM = re.compile(r"^([-*+]|\d+[.)])\s+")
_LINK_OR_IMAGE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\([^)]*\)|<[^>]+>|\s+")
_FIELD_LABEL = re.compile(r"(\*\*|__)([^*_\n]{1,40}?)(:\s*\1|\1\s*:)\s*")
"""A bold label with its colon inside or after the bold (``**Name**:``, ``__Tier:__``)."""
_SETUP_HEADING = re.compile(
    r"^#+\s*(prerequisites?|requirements?|installation|install|setup|dependencies|"
    r"table of contents|contents|toc)\b",
    re.IGNORECASE,
)


def _is_noise(line: str) -> bool:
    """A line that carries no prose: a rule, a table row, badges, links or tags only."""
    if _RULE.match(line) or line.startswith("|") or line.startswith("<!--"):
        return True
    return not _LINK_OR_IMAGE.sub("", line)


def _is_field_list(lines: list[str]) -> bool:
    """Every line starts with a bold label, and there are two labels or more, or the one label's
    value is a single word (``**Version**: 1.0``)."""
    if not all(_FIELD_LABEL.match(line) for line in lines):
        return False
    labels = [m for line in lines for m in _FIELD_LABEL.finditer(line)]
    if len(labels) > 1:
        return True
    return len(lines[0][labels[0].end() :].split()) <= 1


def _paragraphs(body: str) -> list[tuple[list[str], bool]]:
    """``(lines, under a setup heading)`` per paragraph, noise removed."""
    found: list[tuple[list[str], bool]] = []
    current: list[str] = []
    in_fence = setup = False

    def close() -> None:
        nonlocal current
        if current:
            found.append((current, setup))
        current = []

    for raw in body.split("\n"):
        line = raw.strip()
        if _FENCE.match(line):
            close()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if line.startswith("#"):
            close()
            setup = bool(_SETUP_HEADING.match(line))
            continue
        if not line or _is_noise(line):
            close()
            continue
        current.append(line)
    close()
    return found


def first_paragraph(body: str, limit: int = MAX_DESCRIPTION_LENGTH) -> str:
    """The first prose paragraph of Markdown ``body`` (see the module docstring), lines joined
    with spaces and cut at a word to ``limit``; ``""`` when there is no text at all."""
    paragraphs = _paragraphs(body)
    prose = [
        lines
        for lines, setup in paragraphs
        if not setup
        and not all(_LIST_ITEM.match(line) for line in lines)
        and not _is_field_list(lines)
    ]
    chosen = prose[0] if prose else (paragraphs[0][0] if paragraphs else [])
    text = " ".join(" ".join(chosen).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3].rsplit(" ", 1)[0]
    return cut + "..."
