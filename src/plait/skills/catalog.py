"""The skill catalog: ordered sources, name precedence, diagnostics, incremental refresh.

Precedence decides which skill wins when several share a frontmatter ``name``:

==========================  ==============================================================
:attr:`Precedence.FIRST_WINS`  the earlier source wins (default; ADK). List sources from the
                               most to the least specific - project, then user, then built-in
                               - and you get the agentskills.io rule "project over user".
:attr:`Precedence.LAST_WINS`   the later source wins (deepagents: base → user → project).
==========================  ==============================================================

Within one source the first skill in discovery order wins under ``FIRST_WINS`` and the last
under ``LAST_WINS``. Losers stay listed with ``shadowed_by`` set to the winner's ref and a
``name-shadowed`` diagnostic (info across sources, warning within one).

:meth:`SkillCatalog.refresh` rediscovers every source; sources cache by stat or content, so only
changed SKILL.md files are parsed again. It reports added, removed and changed refs and bumps
:attr:`SkillCatalog.generation` whenever the catalog changed - render once per generation
(:meth:`SkillCatalog.render` caches by it). A source that fails keeps its last entries and
records a ``source-unavailable`` error; it never raises out of ``load``/``refresh``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from plait.errors import ConfigurationError
from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.errors import SkillNotFound
from plait.skills.model import DiscoveryItem, DiscoveryProblem, Skill, SkillEntry, SkillRef
from plait.skills.render import DEFAULT_OVERFLOW_HINT, PromptFormat, render_prompt
from plait.skills.sources.base import SkillSource

__all__ = ["Precedence", "RefreshResult", "SkillCatalog"]


class Precedence(StrEnum):
    FIRST_WINS = "first-wins"
    LAST_WINS = "last-wins"


@dataclass(frozen=True, slots=True)
class RefreshResult:
    """What a load or refresh changed, by ref; ``generation`` is the catalog's after it."""

    added: tuple[SkillRef, ...]
    removed: tuple[SkillRef, ...]
    changed: tuple[SkillRef, ...]
    generation: int

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.changed)


@dataclass(frozen=True, slots=True)
class _SourceState:
    items: tuple[DiscoveryItem, ...]
    failure: Diagnostic | None = None


class SkillCatalog:
    """Skills from ordered sources. ``await load()`` (or ``refresh()``) before reading it."""

    def __init__(
        self, sources: Sequence[SkillSource], *, precedence: Precedence = Precedence.FIRST_WINS
    ) -> None:
        ids = [source.id for source in sources]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ConfigurationError(
                f"Skill source ids must be unique; {', '.join(map(repr, duplicates))} appear "
                "more than once. Pass source_id=... to tell them apart."
            )
        self._sources = tuple(sources)
        self.precedence = Precedence(precedence)
        self._states: dict[str, _SourceState] = {}
        self._entries: tuple[SkillEntry, ...] = ()
        self._versions: dict[tuple[str, str], str] = {}
        self._by_ref: dict[SkillRef, SkillEntry] | None = {}
        self._active: dict[str, SkillEntry] = {}
        self._diagnostics: tuple[tuple[str, Diagnostic], ...] = ()
        self._generation = 0
        self._loaded = False
        self._lock = asyncio.Lock()
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._render_cache: dict[tuple[object, ...], str] = {}

    @property
    def sources(self) -> tuple[SkillSource, ...]:
        return self._sources

    @property
    def generation(self) -> int:
        """Bumped on every change (0 before the first load). Cache renders by it."""
        return self._generation

    @property
    def loaded(self) -> bool:
        return self._loaded

    async def load(self) -> RefreshResult:
        """Discover every source; the first call reports every skill as added."""
        return await self.refresh()

    def _loop_lock(self) -> asyncio.Lock:
        """The refresh lock of the running event loop: a refresh left holding the lock in a loop
        closed without cancelling it (so never released) does not block later loops."""
        loop = asyncio.get_running_loop()
        if self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def refresh(self) -> RefreshResult:
        """Rediscover every source and report what changed since the last (re)load."""
        async with self._loop_lock():
            results = await asyncio.gather(*(self._discover(s) for s in self._sources))
            states = {s.id: r for s, r in zip(self._sources, results, strict=True)}
            return self._apply(states)

    async def _discover(self, source: SkillSource) -> _SourceState:
        try:
            items = [item async for item in source.discover()]
        except Exception as err:  # a source is a plug-in boundary: record, keep the rest
            previous = self._states.get(source.id)
            diagnostic = Diagnostic(
                Severity.ERROR,
                Code.SOURCE_UNAVAILABLE,
                f"Skill source {source.id!r} failed: {type(err).__name__}: "
                f"{str(err).rstrip('.')}. Its skills are those of its last successful "
                "discovery (none if it never succeeded).",
                source.id,
            )
            return _SourceState(previous.items if previous else (), diagnostic)
        return _SourceState(tuple(items))

    def _apply(self, states: dict[str, _SourceState]) -> RefreshResult:
        old = self._versions
        ordered = [
            item
            for source in self._sources
            for item in states[source.id].items
            if isinstance(item, SkillEntry)
        ]
        entries, shadow_notes = _resolve(ordered, self.precedence)
        new = {(e.source_id, e.id): e.version for e in entries}
        added = tuple(SkillRef(*key) for key in new if key not in old)
        removed = tuple(SkillRef(*key) for key in old if key not in new)
        changed = tuple(
            SkillRef(*key) for key, version in new.items() if old.get(key, version) != version
        )
        diagnostics = _collect_diagnostics(self._sources, states, entries, shadow_notes)
        first = not self._loaded
        if first or added or removed or changed or diagnostics != self._diagnostics:
            self._generation += 1
            self._render_cache.clear()
        self._states = states
        self._entries = tuple(entries)
        self._versions = new
        self._by_ref = None
        self._active = {e.name: e for e in entries if e.shadowed_by is None}
        self._diagnostics = diagnostics
        self._loaded = True
        return RefreshResult(added, removed, changed, self._generation)

    # --- queries ------------------------------------------------------------------------------

    def entries(self, *, include_shadowed: bool = True) -> list[SkillEntry]:
        """Every usable skill in source order, shadowed ones included unless asked not to."""
        return [e for e in self._entries if include_shadowed or e.shadowed_by is None]

    def active(self) -> list[SkillEntry]:
        """The winning skill for each name, in source order."""
        return self.entries(include_shadowed=False)

    def problems(self) -> list[DiscoveryProblem]:
        """Skills that were skipped and source-level notices, in source order."""
        return [
            item
            for source in self._sources
            for item in self._states.get(source.id, _SourceState(())).items
            if isinstance(item, DiscoveryProblem)
        ]

    def diagnostics(
        self,
        *,
        min_severity: Severity = Severity.INFO,
        source_id: str | None = None,
        code: Code | None = None,
    ) -> list[Diagnostic]:
        """Every diagnostic of the last (re)load, filtered. Files name the skill locations."""
        rank = _SEVERITY_RANK[min_severity]
        return [
            d
            for origin, d in self._diagnostics
            if _SEVERITY_RANK[d.severity] >= rank
            and (code is None or d.code is code)
            and (source_id is None or origin == source_id)
        ]

    def get(self, name: str) -> SkillEntry:
        """The active skill called ``name``; raises :class:`SkillNotFound` listing the names."""
        entry = self._active.get(name)
        if entry is None:
            raise SkillNotFound(name, list(self._active))
        return entry

    def _refs(self) -> dict[SkillRef, SkillEntry]:
        if self._by_ref is None:
            self._by_ref = {entry.ref: entry for entry in self._entries}
        return self._by_ref

    def find(self, ref: SkillRef) -> SkillEntry | None:
        """The entry with this ref, shadowed or not."""
        return self._refs().get(ref)

    def source(self, source_id: str) -> SkillSource:
        for source in self._sources:
            if source.id == source_id:
                return source
        raise KeyError(source_id)

    def _entry(self, skill: str | SkillEntry | SkillRef) -> SkillEntry:
        if isinstance(skill, SkillEntry):
            return skill
        if isinstance(skill, SkillRef):
            found = self._refs().get(skill)
            if found is None:
                raise SkillNotFound(str(skill), [str(r) for r in self._refs()])
            return found
        return self.get(skill)

    async def read(self, skill: str | SkillEntry | SkillRef, path: str | None = None) -> bytes:
        """The body of a skill (no ``path``) or one of its files, from its source."""
        entry = self._entry(skill)
        return await self.source(entry.source_id).read(entry.id, path)

    async def load_skill(self, skill: str | SkillEntry | SkillRef) -> Skill:
        """A skill with its body and the list of its other files."""
        entry = self._entry(skill)
        source = self.source(entry.source_id)
        body = await source.read(entry.id)
        resources = await source.list(entry.id)
        return Skill(entry, body.decode("utf-8", errors="replace"), tuple(resources))

    def render(
        self,
        format: PromptFormat = PromptFormat.MARKDOWN,
        *,
        budget: int | None = None,
        overflow_hint: str = DEFAULT_OVERFLOW_HINT,
        include_hidden: bool = False,
    ) -> str:
        """The active skills rendered for a prompt, cached until the generation changes.

        Skills with ``disable-model-invocation: true`` are left out unless ``include_hidden``.
        """
        key = (self._generation, PromptFormat(format), budget, overflow_hint, include_hidden)
        cached = self._render_cache.get(key)
        if cached is None:
            shown = [e for e in self.active() if include_hidden or e.meta.model_invocable]
            cached = render_prompt(shown, format, budget=budget, overflow_hint=overflow_hint)
            self._render_cache[key] = cached
        return cached


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


def _resolve(
    ordered: list[SkillEntry], precedence: Precedence
) -> tuple[list[SkillEntry], list[tuple[str, Diagnostic]]]:
    """Mark every skill that loses its name to another with ``shadowed_by``."""
    winners: dict[str, SkillEntry] = {}
    candidates = ordered if precedence is Precedence.FIRST_WINS else reversed(ordered)
    for entry in candidates:
        winners.setdefault(entry.name, entry)
    resolved: list[SkillEntry] = []
    notes: list[tuple[str, Diagnostic]] = []
    for entry in ordered:
        winner = winners[entry.name]
        if winner is entry:
            resolved.append(entry)
            continue
        resolved.append(replace(entry, shadowed_by=winner.ref))
        same_source = winner.source_id == entry.source_id
        note = Diagnostic(
            Severity.WARNING if same_source else Severity.INFO,
            Code.NAME_SHADOWED,
            f"Skill {entry.name!r} ({entry.ref}) is shadowed by {winner.ref}, which has the "
            f"same name ({precedence.value} precedence)."
            + (" Rename one of them." if same_source else ""),
            entry.location,
        )
        notes.append((entry.source_id, note))
    return resolved, notes


def _collect_diagnostics(
    sources: Sequence[SkillSource],
    states: dict[str, _SourceState],
    entries: list[SkillEntry],
    shadow_notes: list[tuple[str, Diagnostic]],
) -> tuple[tuple[str, Diagnostic], ...]:
    """Every diagnostic with the id of the source it concerns, in source order."""
    collected: list[tuple[str, Diagnostic]] = []
    for source in sources:
        state = states[source.id]
        if state.failure is not None:
            collected.append((source.id, state.failure))
        for item in state.items:
            if isinstance(item, DiscoveryProblem):
                collected.extend((source.id, d) for d in item.diagnostics)
    for entry in entries:
        collected.extend((entry.source_id, d) for d in entry.diagnostics)
    collected.extend(shadow_notes)
    return tuple(collected)
