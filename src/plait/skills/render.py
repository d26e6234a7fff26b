"""Rendering a skill catalog for a system prompt: Markdown or XML, within a character budget.

:func:`render_xml` is byte-identical to ``skills-ref to-prompt`` for the same skills in the same
order (``html.escape`` on name and description, one tag or value per line, the location
unescaped). :func:`render_markdown` gives one line per skill:

``- **name**: description (license: …; compatibility: …; allowed tools: …) — path: location``

With a ``budget`` (characters), the output never exceeds it: the skills are taken in the given
order while they fit, and one final line says how many more exist and how to find them
(``overflow_hint``). If even that minimal form does not fit, the minimal form is returned.
The subset is deterministic: the same entries and budget always give the same text.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from enum import StrEnum

from plait.skills.model import SkillEntry

__all__ = [
    "DEFAULT_OVERFLOW_HINT",
    "PromptFormat",
    "markdown_line",
    "render_markdown",
    "render_prompt",
    "render_xml",
    "xml_block",
]

DEFAULT_OVERFLOW_HINT = "List the skill folders to find them."


class PromptFormat(StrEnum):
    MARKDOWN = "markdown"
    XML = "xml"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def markdown_line(entry: SkillEntry) -> str:
    """One Markdown list item for a skill (all fields collapsed onto one line)."""
    meta = entry.meta
    notes = []
    if meta.license:
        notes.append(f"license: {_one_line(meta.license)}")
    if meta.compatibility:
        notes.append(f"compatibility: {_one_line(meta.compatibility)}")
    if meta.allowed_tools:
        notes.append(f"allowed tools: {' '.join(meta.allowed_tools)}")
    annotation = f" ({'; '.join(notes)})" if notes else ""
    return (
        f"- **{_one_line(meta.name)}**: {_one_line(meta.description)}{annotation}"
        f" — path: {entry.location}"
    )


def xml_block(entry: SkillEntry) -> str:
    """One ``<skill>`` element exactly as ``skills-ref`` prints it."""
    return "\n".join(
        (
            "<skill>",
            "<name>",
            html.escape(entry.meta.name),
            "</name>",
            "<description>",
            html.escape(entry.meta.description),
            "</description>",
            "<location>",
            entry.location,
            "</location>",
            "</skill>",
        )
    )


def render_markdown(
    entries: Sequence[SkillEntry],
    *,
    budget: int | None = None,
    overflow_hint: str = DEFAULT_OVERFLOW_HINT,
) -> str:
    """One line per skill; ``""`` for no skills."""

    def overflow(count: int) -> str:
        return f"- ({count} more skill{'s' if count != 1 else ''} not listed here. {overflow_hint})"

    return _fit((), entries, markdown_line, (), budget, overflow)


def render_xml(
    entries: Sequence[SkillEntry],
    *,
    budget: int | None = None,
    overflow_hint: str = DEFAULT_OVERFLOW_HINT,
) -> str:
    """An ``<available_skills>`` block; empty input gives the empty block, as ``skills-ref``."""

    def overflow(count: int) -> str:
        text = html.escape(
            f"{count} more skill{'s' if count != 1 else ''} not listed here. {overflow_hint}"
        )
        return f'<more_skills count="{count}">{text}</more_skills>'

    return _fit(
        ("<available_skills>",), entries, xml_block, ("</available_skills>",), budget, overflow
    )


def render_prompt(
    entries: Sequence[SkillEntry],
    format: PromptFormat = PromptFormat.MARKDOWN,
    *,
    budget: int | None = None,
    overflow_hint: str = DEFAULT_OVERFLOW_HINT,
) -> str:
    """:func:`render_markdown` or :func:`render_xml` by ``format``."""
    render = render_xml if PromptFormat(format) is PromptFormat.XML else render_markdown
    return render(entries, budget=budget, overflow_hint=overflow_hint)


def _fit(
    head: tuple[str, ...],
    entries: Sequence[SkillEntry],
    render: Callable[[SkillEntry], str],
    tail: tuple[str, ...],
    budget: int | None,
    overflow: Callable[[int], str],
) -> str:
    """Join ``head``, the rendered entries and ``tail`` by newlines; with a budget, keep the
    longest prefix of entries that fits with the overflow line, rendering no more than needed.

    With ``k`` of ``n`` entries shown the length is ``fixed + used_k + len(overflow(n - k))``,
    where ``fixed`` counts head and tail with their newlines and ``used_k`` the first ``k``
    lines with theirs; all ``n`` without an overflow line is ``fixed + used_n - 1``.
    """
    if budget is None:
        return "\n".join((*head, *(render(e) for e in entries), *tail))
    total = len(entries)
    fixed = sum(len(part) + 1 for part in (*head, *tail))
    lines: list[str] = []
    used = 0
    best = 0
    for entry in entries:
        line = render(entry)
        lines.append(line)
        used += len(line) + 1
        shown = len(lines)
        if shown == total:
            if fixed + used - 1 <= budget:
                return "\n".join((*head, *lines, *tail))
            break
        if fixed + used + len(overflow(total - shown)) <= budget:
            best = shown
        elif fixed + used > budget:
            break
    if total == 0:
        return "\n".join((*head, *tail))
    return "\n".join((*head, *lines[:best], overflow(total - best), *tail))
