"""Skills stored in a plait backend, read through its read surface only.

Layout under ``prefix``: ``<prefix>/<skill-folder>/SKILL.md`` (nested folders allowed up to
``max_depth``, default 32), or ``<prefix>/SKILL.md`` for a single skill; ``SKILL.md`` in any
letter case. A SKILL.md inside another skill's folder, one deeper than ``max_depth`` and skills
past ``max_skills`` are not loaded, each with a warning naming them. A backend has no
``stat``, so each discovery reads every SKILL.md; only files whose content hash changed are
parsed again.
Locations are virtual absolute paths: ``/<prefix>/<id>/SKILL.md``.

A SKILL.md whose whole content is a relative path (a git symlink checked out as text, see
:mod:`plait.skills.skill_file`) is followed, as :class:`~plait.skills.sources.filesystem.
FilesystemSource` does, when its target stays under ``prefix``: the skill gets a ``text-link``
warning and its files are read from the target's folder. A target naming a skill file
(``skill.md`` in any case) is read under exactly that spelling; a target folder is read through
the skill file its listing holds (``SKILL.md`` preferred), so a case-sensitive backend never
looks for a ``SKILL.md`` that is not there. A target outside ``prefix``, an
absolute one, a missing or unreadable one, or one that is again only a path is a ``text-link``
error for that skill alone.

Paths are normalised (``..`` and NUL refused) and joined under the skill's folder, but symlinks
are the backend's business: a :class:`~plait.backends.LocalBackend` follows a symlink anywhere
inside *its* root, so a link in a skill folder can reach other blobs of the same backend (other
skills, evicted results of any thread). Give skills a backend root of their own, or use a
:class:`~plait.skills.sources.filesystem.FilesystemSource`, which confines reads to the skill
folder.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import AsyncIterator
from pathlib import PurePosixPath

from plait.backends.base import BackendError, BackendReadSurface
from plait.paths import PathEscapeError, normalize_virtual_path
from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.errors import (
    SkillFileNotFound,
    SkillFileTooLarge,
    SkillNotFound,
    SkillSourceError,
)
from plait.skills.model import DiscoveryItem, DiscoveryProblem, SkillFileStat, content_version
from plait.skills.skill_file import (
    is_skill_file_name,
    pick_skill_file,
    skill_file_name_warning,
    text_link_followed,
    text_link_refused,
    text_link_target,
)
from plait.skills.sources.base import (
    DEFAULT_IGNORED,
    DEFAULT_MAX_FILE_BYTES,
    assess_skill_md,
    body_bytes,
)

__all__ = ["BackendSource"]


class BackendSource:
    """A :class:`~plait.skills.sources.base.SkillSource` over a
    :class:`~plait.backends.base.BackendReadSurface` (``read``, ``exists``, ``ls``)."""

    def __init__(
        self,
        backend: BackendReadSurface,
        *,
        prefix: str = "skills",
        source_id: str = "backend",
        max_depth: int = 32,
        max_skills: int = 10_000,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        ignore: frozenset[str] = DEFAULT_IGNORED,
    ) -> None:
        self._backend = backend
        self._prefix = normalize_virtual_path(prefix) if prefix.strip("/") else ""
        self._id = source_id
        self.max_depth = max_depth
        self.max_skills = max_skills
        self.max_file_bytes = max_file_bytes
        self.ignore = ignore
        self._folders: dict[str, str] = {}
        self._cache: dict[str, tuple[str, DiscoveryItem]] = {}
        self._names: dict[str, str] = {}

    @property
    def id(self) -> str:
        return self._id

    async def _skill_files(
        self,
    ) -> tuple[builtins.list[tuple[str, str]], builtins.list[tuple[Code, str]]]:
        """``(skill id, SKILL.md path)`` pairs of the outermost skill folders, and notices:
        skill files too deep, inside another skill's folder, or past ``max_skills``."""
        base = self._prefix
        try:
            listed = await self._backend.ls(f"{base}/" if base else "")
        except BackendError as err:
            raise SkillSourceError(f"Cannot list skills under {base or '/'!r}: {err}") from err
        folders: dict[str, str] = {}
        too_deep: builtins.list[str] = []
        for raw in listed:
            try:
                path = normalize_virtual_path(raw)
            except PathEscapeError:
                continue
            rel = path[len(base) + 1 :] if base else path
            if base and not path.startswith(base + "/"):
                continue
            folder, _, name = rel.rpartition("/")
            parts = folder.split("/") if folder else []
            if not is_skill_file_name(name) or any(p in self.ignore for p in parts):
                continue
            if len(parts) > self.max_depth:
                too_deep.append("/" + path)
            elif folder not in folders or name == "SKILL.md":
                folders[folder] = path
        outermost = [f for f in sorted(folders) if not _inside_any(f, folders)]
        notes = [
            (
                Code.NESTED_SKILL,
                f"/{folders[f]} was not loaded as a skill: it lies inside another skill's folder, "
                "whose files (samples, templates) are not skills. Move it out to make it a skill.",
            )
            for f in sorted(folders)
            if _inside_any(f, folders)
        ]
        if too_deep:
            notes.append(
                (
                    Code.DEPTH_LIMIT,
                    f"{len(too_deep)} SKILL.md file(s) deeper than max_depth={self.max_depth} were "
                    f"not loaded: {', '.join(too_deep[:5])}. Raise max_depth.",
                )
            )
        if len(outermost) > self.max_skills:
            skipped = [f"/{folders[f]}" for f in outermost[self.max_skills :]]
            notes.append(
                (
                    Code.SCAN_LIMIT,
                    f"Stopped at max_skills={self.max_skills}; {len(skipped)} skill(s) not loaded, "
                    f"first: {', '.join(skipped[:5])}. Raise max_skills.",
                )
            )
        single = self._prefix.rsplit("/", 1)[-1] or "skill"
        pairs = [(f or single, folders[f]) for f in outermost[: self.max_skills]]
        return pairs, notes

    async def discover(self) -> AsyncIterator[DiscoveryItem]:
        cache: dict[str, tuple[str, DiscoveryItem]] = {}
        folders: dict[str, str] = {}
        names: dict[str, str] = {}
        pairs, notes = await self._skill_files()
        for skill_id, path in pairs:
            item, served = await self._assess(skill_id, path)
            folders[skill_id], _, names[skill_id] = served.rpartition("/")
            cache[skill_id] = (item.version or "", item)
            yield item
        for code, note in notes:
            location = "/" + self._prefix
            diagnostic = Diagnostic(Severity.WARNING, code, note, location)
            yield DiscoveryProblem(self._id, None, location, (diagnostic,))
        self._folders, self._names, self._cache = folders, names, cache

    async def _assess(self, skill_id: str, path: str) -> tuple[DiscoveryItem, str]:
        """The skill or problem at ``path``, and the SKILL.md its files are served beside (a
        text link's target, else ``path``)."""
        location = "/" + path
        try:
            data = await self._read_capped(path)
        except (FileNotFoundError, BackendError, PathEscapeError, SkillFileTooLarge) as err:
            # One unreadable SKILL.md skips that skill, never the whole source.
            diagnostic = Diagnostic(
                Severity.ERROR, Code.UNREADABLE, f"Cannot read SKILL.md: {err}; skipped.", location
            )
            return DiscoveryProblem(self._id, skill_id, location, (diagnostic,)), path
        extra: tuple[Diagnostic, ...] = ()
        if not path.endswith("/SKILL.md") and path != "SKILL.md":
            extra = (skill_file_name_warning(location),)
        link = text_link_target(data)
        served = path
        if link is not None:
            followed = await self._follow_text_link(path, link)
            if isinstance(followed, str):
                diagnostic = text_link_refused(location, link, followed)
                return DiscoveryProblem(self._id, skill_id, location, (diagnostic,)), path
            served, data = followed
            extra += (text_link_followed(location, link, PurePosixPath("/" + served)),)
        cached = self._cache.get(skill_id)
        if (
            cached is not None
            and served == path
            and cached[0] == content_version(data)
            and cached[1].location == location
        ):
            return cached[1], served
        item = assess_skill_md(
            data,
            source_id=self._id,
            skill_id=skill_id,
            folder_name=skill_id.rsplit("/", 1)[-1],
            location=location,
            extra_diagnostics=extra,
        )
        return item, served

    async def _follow_text_link(self, path: str, link: str) -> tuple[str, bytes] | str:
        """``(target path, its bytes)`` for the text ``link`` in ``path``, or why it cannot be
        followed (the end of a ``text-link`` error message)."""
        if link.startswith("/"):
            return "is an absolute path (only a path relative to the link is followed)"
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), link))
        base = self._prefix
        if (
            target == ".."
            or target.startswith("../")
            or not target.startswith(base + "/" if base else "")
        ):
            return "lies outside the source root"
        try:
            if not is_skill_file_name(posixpath.basename(target)):
                listed = await self._backend.ls(target + "/")
                inner = [p[len(target) + 1 :] for p in listed if p.startswith(target + "/")]
                target = (
                    f"{target}/{pick_skill_file([n for n in inner if '/' not in n]) or 'SKILL.md'}"
                )
            data = await self._read_capped(target)
        except (FileNotFoundError, BackendError, PathEscapeError, SkillFileTooLarge) as err:
            return f"cannot be read ({err})"
        if text_link_target(data) is not None:
            return "is again only a path"
        return target, data

    async def _folder(self, ref: str) -> str:
        """The folder of discovered skill ``ref`` (the first read discovers); a ``..`` in
        ``ref`` raises :class:`PathEscapeError`."""
        if not self._folders:
            async for _ in self.discover():
                pass
        folder = self._folders.get(ref)
        if folder is None:
            normalize_virtual_path(ref)
            raise SkillNotFound(ref, sorted(self._folders), where=f"backend source {self._id!r}")
        return folder

    async def _skill_md(self, ref: str) -> bytes:
        """The SKILL.md (a text link's target) of discovered skill ``ref``."""
        folder = await self._folder(ref)
        return await self._read_capped(f"{folder}/{self._names.get(ref, 'SKILL.md')}")

    async def _read_capped(self, path: str) -> bytes:
        """The text at ``path`` as UTF-8, at most ``max_file_bytes`` bytes once encoded: a longer
        one raises :class:`SkillFileTooLarge`. Backends read characters, so at most
        ``max_file_bytes + 1`` characters are asked for (every character is at least one byte,
        so more than that is over the cap unread) and the encoded length is then checked."""
        text = await self._backend.read(path, 0, self.max_file_bytes + 1)
        data = text.encode("utf-8")
        if len(data) > self.max_file_bytes:
            raise SkillFileTooLarge("/" + path, None, self.max_file_bytes)
        return data

    async def read(self, ref: str, path: str | None = None) -> bytes:
        if path is None:
            return body_bytes(await self._skill_md(ref))
        folder = await self._folder(ref)
        target = f"{folder}/{normalize_virtual_path(path)}"
        try:
            return await self._read_capped(target)
        except FileNotFoundError:
            raise SkillFileNotFound(ref, path, await self.list(ref)) from None

    async def stat(self, ref: str, path: str | None = None) -> SkillFileStat:
        if path is None:
            data = await self._skill_md(ref)
            return SkillFileStat(len(body_bytes(data)), content_version(data))
        data = await self.read(ref, path)
        return SkillFileStat(len(data), content_version(data))

    async def list(self, ref: str) -> builtins.list[str]:
        folder = await self._folder(ref)
        listed = await self._backend.ls(folder + "/")
        found = []
        for raw in listed:
            try:
                path = normalize_virtual_path(raw)
            except PathEscapeError:
                continue
            inner = path[len(folder) + 1 :]
            if path.startswith(folder + "/") and not is_skill_file_name(inner):
                found.append(path[len(folder) + 1 :])
        return sorted(found)


def _inside_any(folder: str, folders: dict[str, str]) -> bool:
    """Whether ``folder`` is nested inside another skill folder (the root one included)."""
    if not folder:
        return False
    parts = folder.split("/")
    return any("/".join(parts[:i]) in folders for i in range(len(parts)))
