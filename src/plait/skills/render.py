"""Rendering a skill catalog for a system prompt: Markdown or XML, within a character budget.

:func:`render_xml` is byte-identical to ``skills-ref to-prompt`` for the same skills in the same
order (``html.escape`` on name and description, one tag or value per line, the location
unescaped). :func:`render_markdown` gives one line per skill:

``- **name**: description (license: …; compatibility: …; allowed tools: …) — path: location``

With a ``budget`` (characters), the output never exceeds it: the skills are taken in the given
order while they fit, and one final line says how many more exist and how to find them
(``overflow_hint``). If even that minimal form does not fit, the minimal form is returned.
The subset is deterministic: the same entries and budget always give the same text.

**Names tier.** With ``names_share`` (a fraction of ``budget``, ``0`` by default: off), the
skills after the described ones are named without their descriptions on one line
(``names_intro``: a, b, c), which ends at the first name that does not fit; the described ones
leave that share free (the first ``keep`` of them may use the whole budget) and the named ones
take it and whatever the descriptions left. The overflow line then counts the skills neither
described nor named, and is left out when there are none. A catalog that fits its budget whole
is rendered as without the tier. Names are collapsed onto one line (Markdown) or HTML-escaped
(XML) as descriptions are; a name holding anything but letters, digits, ``-``, ``_`` and ``.``
is double-quoted (JSON style) so the comma-separated list stays unambiguous.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import islice

from plait.skills.model import SkillEntry

__all__ = [
    "DEFAULT_NAMES_INTRO",
    "DEFAULT_OVERFLOW_HINT",
    "FittedPrompt",
    "PromptFormat",
    "fit_prompt",
    "markdown_line",
    "render_markdown",
    "render_prompt",
    "render_xml",
    "xml_block",
]

DEFAULT_OVERFLOW_HINT = "List the skill folders to find them."

DEFAULT_NAMES_INTRO = "Also possibly relevant (read a skill's SKILL.md for its description)"
"""What precedes the names tier's names (``names_intro``)."""

_BARE_NAME = re.compile(r"[\w.-]+")


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


def _named(name: str) -> str:
    """A skill name as the names tier writes it: bare, or double-quoted when it holds anything
    but letters, digits, ``-``, ``_`` and ``.`` (so ``, `` always separates two names)."""
    name = _one_line(name)
    return name if _BARE_NAME.fullmatch(name) else json.dumps(name, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class FittedPrompt:
    """A rendered list and what it holds: the first ``described`` of the ``total`` entries with
    their descriptions, the next ``named`` by name only; the rest only counted."""

    text: str
    described: int
    named: int
    total: int

    @property
    def complete(self) -> bool:
        """Whether every entry is described (no names tier, no overflow line)."""
        return self.described == self.total


@dataclass(frozen=True, slots=True)
class _Shape:
    head: tuple[str, ...]
    line: Callable[[SkillEntry], str]
    name: Callable[[str], str]
    names: Callable[[str], str]
    tail: tuple[str, ...]
    overflow: Callable[[int], str]


def _markdown(overflow_hint: str, names_intro: str) -> _Shape:
    def overflow(count: int) -> str:
        return f"- ({count} more skill{'s' if count != 1 else ''} not listed here. {overflow_hint})"

    intro = f"- {_one_line(names_intro)}: "
    return _Shape((), markdown_line, _named, intro.__add__, (), overflow)


def _xml(overflow_hint: str, names_intro: str) -> _Shape:
    def overflow(count: int) -> str:
        text = html.escape(
            f"{count} more skill{'s' if count != 1 else ''} not listed here. {overflow_hint}"
        )
        return f'<more_skills count="{count}">{text}</more_skills>'

    def name(text: str) -> str:
        return html.escape(_named(text))

    def names(joined: str) -> str:  # ", " needs no escaping: the joined names are escaped
        return f"<skill_names>{html.escape(names_intro)}: {joined}</skill_names>"

    return _Shape(
        ("<available_skills>",), xml_block, name, names, ("</available_skills>",), overflow
    )


def fit_prompt(
    entries: Sequence[SkillEntry],
    format: PromptFormat = PromptFormat.MARKDOWN,
    *,
    budget: int | None = None,
    overflow_hint: str = DEFAULT_OVERFLOW_HINT,
    names_share: float = 0.0,
    names_intro: str = DEFAULT_NAMES_INTRO,
    keep: int = 0,
) -> FittedPrompt:
    """:func:`render_prompt` with what the text holds (see the module docstring for the names
    tier). ``names_share`` is clamped to ``[0, 1]``; ``keep`` entries at the front may be
    described within the whole budget rather than the part the names leave."""
    if PromptFormat(format) is PromptFormat.XML:
        shape = _xml(overflow_hint, names_intro)
    else:
        shape = _markdown(overflow_hint, names_intro)
    total = len(entries)
    if budget is None:
        return FittedPrompt(
            _join(shape, [shape.line(e) for e in entries], None, 0), total, 0, total
        )
    reserve = int(budget * min(max(names_share, 0.0), 1.0))
    lines, complete = _described(entries, shape, budget, reserve, keep)
    if complete:
        return FittedPrompt(_join(shape, lines, None, 0), total, 0, total)
    names = _names(entries, shape, budget, lines) if reserve else []
    rest = total - len(lines) - len(names)
    line = shape.names(", ".join(names)) if names else None
    return FittedPrompt(_join(shape, lines, line, rest), len(lines), len(names), total)


def _size(shape: _Shape, used: int, names_line: int | None, rest: int) -> int:
    """The length of head, lines (``used`` counts them with their newlines), the names line
    (its length, if any), the overflow line (for ``rest`` > 0) and tail, joined by newlines."""
    size = sum(len(part) + 1 for part in (*shape.head, *shape.tail)) + used
    if names_line is not None:
        size += names_line + 1
    return size + len(shape.overflow(rest)) if rest else size - 1


def _described(
    entries: Sequence[SkillEntry], shape: _Shape, budget: int, reserve: int, keep: int
) -> tuple[list[str], bool]:
    """The longest prefix of rendered lines that fits with the overflow line within ``budget``
    less ``reserve`` (the first ``keep`` within the whole ``budget``), rendering no more lines
    than needed; every line and ``True`` when every entry fits the whole budget."""
    total = len(entries)
    lines: list[str] = []
    used = best = 0
    for entry in entries:
        line = shape.line(entry)
        lines.append(line)
        used += len(line) + 1
        shown = len(lines)
        if shown == total:
            if _size(shape, used, None, 0) <= budget:
                return lines, True
            break
        limit = budget if shown <= keep else budget - reserve
        if _size(shape, used, None, total - shown) <= limit:
            best = shown
        elif _size(shape, used, None, 0) + 1 > budget:
            break  # (it goes on past ``limit``: every entry may still fit the whole budget)
    return lines[:best], False


def _names(
    entries: Sequence[SkillEntry], shape: _Shape, budget: int, lines: list[str]
) -> list[str]:
    """The names of the entries after ``lines``', in order, while the names line fits the
    budget with them and the overflow line (it ends at the first name that does not fit)."""
    used = sum(len(line) + 1 for line in lines)
    total = len(entries)
    names: list[str] = []
    length = len(shape.names(""))
    for entry in islice(entries, len(lines), None):  # (lazy: a ranked order is never copied)
        name = shape.name(entry.name)
        grown = length + len(name) + (2 if names else 0)
        if _size(shape, used, grown, total - len(lines) - len(names) - 1) > budget:
            break
        names.append(name)
        length = grown
    return names


def _join(shape: _Shape, lines: list[str], names: str | None, rest: int) -> str:
    parts = [*shape.head, *lines]
    if names is not None:
        parts.append(names)
    if rest:
        parts.append(shape.overflow(rest))
    return "\n".join((*parts, *shape.tail))


def render_markdown(
    entries: Sequence[SkillEntry],
    *,
    budget: int | None = None,
    overflow_hint: str = DEFAULT_OVERFLOW_HINT,
) -> str:
    """One line per skill; ``""`` for no skills."""
    return fit_prompt(
        entries, PromptFormat.MARKDOWN, budget=budget, overflow_hint=overflow_hint
    ).text


def render_xml(
    entries: Sequence[SkillEntry],
    *,
    budget: int | None = None,
    overflow_hint: str = DEFAULT_OVERFLOW_HINT,
) -> str:
    """An ``<available_skills>`` block; empty input gives the empty block, as ``skills-ref``."""
    return fit_prompt(entries, PromptFormat.XML, budget=budget, overflow_hint=overflow_hint).text


def render_prompt(
    entries: Sequence[SkillEntry],
    format: PromptFormat = PromptFormat.MARKDOWN,
    *,
    budget: int | None = None,
    overflow_hint: str = DEFAULT_OVERFLOW_HINT,
    names_share: float = 0.0,
    names_intro: str = DEFAULT_NAMES_INTRO,
) -> str:
    """:func:`render_markdown` or :func:`render_xml` by ``format``, with the names tier taking
    ``names_share`` of the budget (see the module docstring)."""
    return fit_prompt(
        entries,
        format,
        budget=budget,
        overflow_hint=overflow_hint,
        names_share=names_share,
        names_intro=names_intro,
    ).text
