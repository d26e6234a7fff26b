"""One thread's view of the catalog: the skills it was shown, taken once per catalog generation.

A :class:`SkillSnapshot` is immutable. Every thread that loads while the catalog is at the same
generation shares one snapshot, so the prompt section is rendered once per catalog change; a
thread keeps its snapshot until it resets ``skills_metadata`` (or ``auto_refresh`` finds a
change), so one thread's reload never changes what another thread is shown.

The thread state holds only :attr:`SkillSnapshot.summary` (``{"count", "skipped", "digest"}``):
it is written with every dispatch, so it stays a few bytes whatever the number of skills.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plait.skills.catalog import SkillCatalog
from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.lenient import split_allowed_tools
from plait.skills.model import SkillEntry
from plait.skills.render import PromptFormat, fit_prompt

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_NAMES_SHARE",
    "NAMES_INTRO",
    "OVERFLOW_HINT",
    "LoadProblem",
    "SkillSnapshot",
    "include_tools",
    "normalize_location",
    "take_snapshot",
]

DEFAULT_INSTRUCTIONS = (
    "## Skills\n\n"
    "Skills are folders of instructions (and sometimes scripts and references) for specific "
    "tasks. Each skill below is listed with its name, when to use it, and the path of its "
    "SKILL.md. When a task matches a skill, first read its whole SKILL.md with "
    "read_file(path=<that path>), then follow it. Files a skill mentions (scripts/, "
    "references/, assets/) are in the same folder: read them with read_file using the skill "
    "folder's path followed by the relative path."
)
"""The text placed before the skill list in the system prompt."""

OVERFLOW_HINT = "Call search_skills(query) with a few keywords to find them."
"""What the catalog's overflow line says when the budget leaves skills out."""

NAMES_INTRO = (
    "Also possibly relevant, by name only (search_skills with a name gives its description "
    "and path)"
)
"""What precedes the names tier: the skills after the described ones, without descriptions."""

DEFAULT_NAMES_SHARE = 0.25
"""The share of the budget the names tier may take once the catalog is over its budget (``0``:
no names tier). Measured with ``bench/skills_relevance.py``: see the disclosure README."""

_NOTE_ITEMS = 5
_NOTE_NAME_CHARS = 60


@dataclass(frozen=True, slots=True)
class LoadProblem:
    """A warning or error of a load, with where it came from (see ``SkillProblemFound``)."""

    source_id: str
    skill: str | None
    diagnostic: Diagnostic
    skipped: bool


@dataclass(frozen=True, slots=True, eq=False)
class SkillSnapshot:
    """The active skills of one catalog generation, indexed for the per-dispatch work.

    ``section`` is what goes after the agent's system prompt (``""`` when there is nothing to
    say); ``overflowed`` is true when the budget left skills out of the list, which is when
    ``search_skills`` is offered and the list is chosen by relevance each turn
    (:mod:`.listing`); ``note`` is the line about skills that could not be loaded.
    ``tools_by_location`` maps a SKILL.md location (normalised)
    to the skill's ``metadata.include_tools`` names, for skills that have any.
    """

    generation: int
    entries: tuple[SkillEntry, ...]
    listed: tuple[SkillEntry, ...]
    by_name: Mapping[str, SkillEntry]
    by_location: Mapping[str, SkillEntry]
    folders: Mapping[str, SkillEntry]
    tools_by_location: Mapping[str, tuple[str, ...]]
    section: str
    overflowed: bool
    digest: str
    skipped: int
    problems: tuple[LoadProblem, ...] = ()
    note: str = ""

    @property
    def summary(self) -> dict[str, Any]:
        """The JSON value kept in the thread state under ``skills_metadata``."""
        return {"count": len(self.entries), "skipped": self.skipped, "digest": self.digest}

    def matches(self, value: object) -> bool:
        """Whether a state value is this snapshot's summary (after a JSON round trip)."""
        return isinstance(value, dict) and value.get("digest") == self.digest


def normalize_location(path: str) -> str:
    """A path in the one form locations are compared in: ``/``-separated, absolute, with ``.``
    and repeated separators removed (``..`` is collapsed lexically; readers refuse it first)."""
    text = "/" + path.strip().replace("\\", "/").lstrip("/")
    return posixpath.normpath(text)


def include_tools(entry: SkillEntry) -> tuple[str, ...]:
    """The names a skill lists in ``metadata.include_tools`` (space- or comma-separated)."""
    raw = entry.meta.metadata.get("include_tools", "")
    return split_allowed_tools(raw) if isinstance(raw, str) else ()


def take_snapshot(
    catalog: SkillCatalog,
    *,
    format: PromptFormat,
    budget: int | None,
    instructions: str | None,
    names_share: float = DEFAULT_NAMES_SHARE,
) -> SkillSnapshot:
    """Index and render the catalog as it is now (it must be loaded). Over the budget, the
    list is in catalog order with the names tier taking ``names_share`` of the budget."""
    entries = tuple(catalog.active())
    listed = tuple(e for e in entries if e.meta.model_invocable)
    by_location = {normalize_location(e.location): e for e in entries}
    folders = {posixpath.dirname(loc): e for loc, e in by_location.items()}
    tools = {loc: names for loc, e in by_location.items() if (names := include_tools(e))}
    problems = _load_problems(catalog)
    skipped = sum(1 for p in catalog.problems() if p.id is not None)
    catalog_text = ""
    overflowed = False
    if listed:
        fitted = fit_prompt(
            listed,
            format,
            budget=budget,
            overflow_hint=OVERFLOW_HINT,
            names_share=names_share,
            names_intro=NAMES_INTRO,
        )
        catalog_text, overflowed = fitted.text, not fitted.complete
    parts = [catalog_text] if catalog_text else []
    note = _note(catalog)
    if note:
        parts.append(note)
    section = ""
    if parts:
        head = [instructions] if instructions and catalog_text else []
        section = "\n\n".join([*head, "\n".join(parts)])
    return SkillSnapshot(
        generation=catalog.generation,
        entries=entries,
        listed=listed,
        by_name={e.name: e for e in entries},
        by_location=by_location,
        folders=folders,
        tools_by_location=tools,
        section=section,
        overflowed=overflowed,
        digest=_digest(entries),
        skipped=skipped,
        problems=problems,
        note=note,
    )


def _digest(entries: tuple[SkillEntry, ...]) -> str:
    digest = hashlib.sha256()
    for e in entries:
        digest.update(f"{e.source_id}\0{e.id}\0{e.version}\0{e.name}\n".encode())
    return digest.hexdigest()[:16]


def _load_problems(catalog: SkillCatalog) -> tuple[LoadProblem, ...]:
    """Every warning and error of the last load: skipped skills, source notices and failures,
    warnings on loaded skills, and shadowing within one source."""
    found: list[LoadProblem] = []
    for problem in catalog.problems():
        found.extend(
            LoadProblem(problem.source_id, problem.id, d, problem.id is not None)
            for d in problem.diagnostics
            if d.severity is not Severity.INFO
        )
    for failure in catalog.diagnostics(code=Code.SOURCE_UNAVAILABLE):
        found.append(LoadProblem(failure.file or "", None, failure, False))
    for entry in catalog.entries():
        found.extend(
            LoadProblem(entry.source_id, entry.id, d, False)
            for d in entry.diagnostics
            if d.severity is not Severity.INFO
        )
    shadowed = {e.location: e for e in catalog.entries() if e.shadowed}
    for note in catalog.diagnostics(code=Code.NAME_SHADOWED, min_severity=Severity.WARNING):
        loser = shadowed.get(note.file or "")
        if loser is not None:
            found.append(LoadProblem(loser.source_id, loser.id, note, False))
    return tuple(found)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _NOTE_NAME_CHARS else text[: _NOTE_NAME_CHARS - 1] + "…"


def _reason(diagnostics: tuple[Diagnostic, ...]) -> str:
    errors = [d for d in diagnostics if d.is_error] or list(diagnostics)
    return errors[0].code.value.replace("-", " ") if errors else "unknown problem"


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:_NOTE_ITEMS])
    more = len(items) - _NOTE_ITEMS
    return f"{shown}, and {more} more" if more > 0 else shown


def _note(catalog: SkillCatalog) -> str:
    """One bounded line telling the model which skills and sources could not be loaded."""
    skipped = [
        f"{_short(p.id)} ({_reason(p.diagnostics)})" for p in catalog.problems() if p.id is not None
    ]
    failed = [_short(d.file or "?") for d in catalog.diagnostics(code=Code.SOURCE_UNAVAILABLE)]
    sentences = []
    if skipped:
        noun = "skill" if len(skipped) == 1 else "skills"
        sentences.append(f"{len(skipped)} {noun} could not be loaded: {_listing(skipped)}.")
    if failed:
        noun = "skill source" if len(failed) == 1 else "skill sources"
        sentences.append(f"{len(failed)} {noun} failed to load: {_listing(failed)}.")
    if not sentences:
        return ""
    return "Note: " + " ".join(sentences) + " Tell the user if they ask for one of these."
