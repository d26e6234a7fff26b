"""Skills held in memory: tests, programmatic skills, and skills shipped inside a package."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Mapping

from plait.paths import normalize_virtual_path
from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.errors import SkillFileNotFound, SkillNotFound
from plait.skills.model import DiscoveryItem, DiscoveryProblem, SkillFileStat, content_version
from plait.skills.sources.base import assess_cached, body_bytes

__all__ = ["MemorySource"]


class MemorySource:
    """A :class:`~plait.skills.sources.base.SkillSource` over a dict of skills.

    ``skills`` maps a skill id to its files (relative path → text or bytes); each skill needs a
    ``SKILL.md``. Locations are virtual: ``{mount}/{id}/SKILL.md``. :meth:`put` and
    :meth:`remove` change the skills; the next discovery reports the change, re-parsing only
    skills whose SKILL.md bytes changed.
    """

    def __init__(
        self,
        skills: Mapping[str, Mapping[str, str | bytes]] | None = None,
        *,
        source_id: str = "memory",
        mount: str = "/skills",
    ) -> None:
        self._id = source_id
        self._mount = "/" + normalize_virtual_path(mount)
        self._skills: dict[str, dict[str, bytes]] = {}
        self._cache: dict[str, tuple[str, DiscoveryItem]] = {}
        for skill_id, files in (skills or {}).items():
            self.put(skill_id, files)

    @property
    def id(self) -> str:
        return self._id

    def put(self, skill_id: str, files: Mapping[str, str | bytes]) -> None:
        """Add or replace a skill. Paths are normalised; ``..`` raises ``PathEscapeError``."""
        normalized: dict[str, bytes] = {}
        for path, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            normalized[normalize_virtual_path(path)] = data
        self._skills[normalize_virtual_path(skill_id)] = normalized

    def remove(self, skill_id: str) -> bool:
        """Remove a skill; return whether it existed."""
        return self._skills.pop(normalize_virtual_path(skill_id), None) is not None

    def location(self, skill_id: str) -> str:
        return f"{self._mount}/{skill_id}/SKILL.md"

    async def discover(self) -> AsyncIterator[DiscoveryItem]:
        cache: dict[str, tuple[str, DiscoveryItem]] = {}
        for skill_id in sorted(self._skills):
            item = self._assess(skill_id)
            cache[skill_id] = (item.version or "", item)
            yield item
        self._cache = cache

    def _assess(self, skill_id: str) -> DiscoveryItem:
        location = self.location(skill_id)
        data = self._skills[skill_id].get("SKILL.md")
        if data is None:
            diagnostic = Diagnostic(
                Severity.ERROR,
                Code.MISSING_SKILL_MD,
                f"Skill {skill_id!r} has no SKILL.md; skipped. Add one with put().",
                location,
            )
            return DiscoveryProblem(self._id, skill_id, location, (diagnostic,))
        return assess_cached(
            self._cache, data, source_id=self._id, skill_id=skill_id, location=location
        )

    def _files(self, ref: str) -> dict[str, bytes]:
        files = self._skills.get(normalize_virtual_path(ref))
        if files is None or "SKILL.md" not in files:
            raise SkillNotFound(ref, sorted(self._skills), where=f"memory source {self._id!r}")
        return files

    async def read(self, ref: str, path: str | None = None) -> bytes:
        files = self._files(ref)
        if path is None:
            return body_bytes(files["SKILL.md"])
        key = normalize_virtual_path(path)
        if key not in files:
            raise SkillFileNotFound(ref, path, await self.list(ref))
        return files[key]

    async def stat(self, ref: str, path: str | None = None) -> SkillFileStat:
        files = self._files(ref)
        if path is None:
            data = files["SKILL.md"]
            return SkillFileStat(len(body_bytes(data)), content_version(data))
        data = await self.read(ref, path)
        return SkillFileStat(len(data), content_version(data))

    async def list(self, ref: str) -> builtins.list[str]:
        return sorted(p for p in self._files(ref) if p != "SKILL.md")
