"""Skills over another agent's catalog, without a second discovery walk (a subagent's skills
from its parent's, :mod:`plait.subagents`).

::

    from plait.skills.inherited import inherited_sources

    skills = SkillsMiddleware(sources=[".agents/skills"])
    # disclosure mode, with its own settings (budget, instructions, pins) over the same catalog
    reader = Agent(model, middleware=[SkillsMiddleware(sources=inherited_sources(skills))])
    # managed mode over the same catalog
    manager = await create_skill_manager(sources=inherited_sources(skills), gate=allow_all)

Each source of the parent's catalog becomes an :class:`InheritedSource` with the same id: its
``discover()`` yields what the parent's catalog last discovered from that source (skills and
problems, from memory: no folder is walked), and it reads a skill's files through the parent's
source. A refresh of the child's catalog takes the parent's catalog as it is then (after the
parent's own refreshes); a parent catalog that was never loaded is loaded once, and that walk
serves the parent too.

The simplest inheritance needs none of this: put the parent's ``SkillsMiddleware`` instance in
the child's middleware as well (the catalog lives in the instance, each thread's skills state in
its own thread). ``inherited_sources`` is for a child in the other mode, or with other settings.
A skill manager is one conversation's (``create_skill_manager``): do not share one between a
parent and a child, give the child its own over ``inherited_sources``.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import AsyncIterator

from plait.errors import ConfigurationError
from plait.skills.catalog import SkillCatalog
from plait.skills.disclosure.middleware import SkillsMiddleware
from plait.skills.model import DiscoveryItem, SkillFileStat
from plait.skills.sources.base import SkillSource

__all__ = ["InheritedSource", "inherited_sources"]


class InheritedSource:
    """The skills ``catalog`` discovered from its source ``source``, served without walking it
    again (see the module docstring)."""

    def __init__(
        self, catalog: SkillCatalog, source: SkillSource, owner: SkillsMiddleware | None = None
    ) -> None:
        self.catalog = catalog
        self.source = source
        self.owner = owner

    @property
    def id(self) -> str:
        return self.source.id

    async def discover(self) -> AsyncIterator[DiscoveryItem]:
        if not self.catalog.loaded:
            await self._load()
        for entry in self.catalog.entries():
            if entry.source_id == self.id:  # the child's catalog decides its own shadowing
                yield dataclasses.replace(entry, shadowed_by=None)
        for problem in self.catalog.problems():
            if problem.source_id == self.id:
                yield problem

    async def _load(self) -> None:
        # A SkillsMiddleware times its next background refresh from its own loads: a catalog
        # loaded behind its back would look stale to it and be walked again at its first call.
        if self.owner is not None:
            await self.owner._refresher.refresh(force=False)
        else:
            await self.catalog.load()

    async def read(self, ref: str, path: str | None = None) -> bytes:
        return await self.source.read(ref, path)

    async def stat(self, ref: str, path: str | None = None) -> SkillFileStat:
        return await self.source.stat(ref, path)

    async def list(self, ref: str) -> builtins.list[str]:
        return await self.source.list(ref)


def inherited_sources(parent: SkillsMiddleware | SkillCatalog) -> list[SkillSource]:
    """One :class:`InheritedSource` per source of ``parent``'s catalog, in its order."""
    owner = parent if isinstance(parent, SkillsMiddleware) else None
    catalog = parent.catalog if isinstance(parent, SkillsMiddleware) else parent
    if not isinstance(catalog, SkillCatalog):
        raise ConfigurationError(
            f"inherited_sources takes a SkillsMiddleware or a SkillCatalog, got "
            f"{type(parent).__name__}."
        )
    return [InheritedSource(catalog, source, owner) for source in catalog.sources]
