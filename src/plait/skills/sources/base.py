"""The :class:`SkillSource` protocol and what every source shares.

A source finds skills and serves their files. Identity is the source-assigned ``id`` (a folder
path relative to the source root, for instance), never the frontmatter ``name``, which is routing
text and may collide. ``version`` is :func:`~plait.skills.model.content_version` of SKILL.md.

Discovery contract: ``discover()`` yields one :class:`~plait.skills.model.SkillEntry` per usable
skill and one :class:`~plait.skills.model.DiscoveryProblem` per skill it had to skip (or per
source-level notice, with ``id=None``). A broken skill never raises out of ``discover()``; a
source that cannot be used at all (its root is missing) raises
:class:`~plait.skills.errors.SkillSourceError`, which the catalog records as a diagnostic.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Mapping
from typing import Protocol, runtime_checkable

from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.model import (
    DiscoveryItem,
    DiscoveryProblem,
    SkillEntry,
    SkillFileStat,
    content_version,
)
from plait.skills.parser import split_skill_md
from plait.skills.skill_file import DEFAULT_MAX_SKILL_MD_BYTES
from plait.skills.validator import ValidationMode, check_skill_md

__all__ = [
    "DEFAULT_IGNORED",
    "DEFAULT_MAX_FILE_BYTES",
    "SKILL_FILE_NAMES",
    "SkillSource",
    "assess_skill_md",
    "body_bytes",
]

DEFAULT_IGNORED = frozenset({".git", "node_modules", ".hg", ".svn", "__pycache__", ".venv"})
"""Folder names no source descends into."""

DEFAULT_MAX_FILE_BYTES = DEFAULT_MAX_SKILL_MD_BYTES
"""5 MiB: a SKILL.md larger than this is skipped with a ``file-too-large`` error, and a skill
file larger than this is refused by ``read`` (:class:`~plait.skills.errors.SkillFileTooLarge`)."""

SKILL_FILE_NAMES = ("SKILL.md", "skill.md")
"""The skill file, in order of preference (``skill.md`` is accepted with a warning)."""


@runtime_checkable
class SkillSource(Protocol):
    """Where skills come from. Every method is async; ``ref`` is the source-assigned skill id.

    ``read(ref)`` returns the SKILL.md *body* (frontmatter removed); ``read(ref, path)`` returns
    the bytes of a file inside the skill folder, where ``path`` is relative to that folder
    (a leading ``/`` means the folder itself; ``..`` raises :class:`plait.paths.PathEscapeError`).
    ``stat`` sizes the same thing ``read`` would return, with the content version. ``list``
    returns the skill's other files as sorted relative paths (never SKILL.md itself).
    """

    @property
    def id(self) -> str: ...

    def discover(self) -> AsyncIterator[DiscoveryItem]: ...

    async def read(self, ref: str, path: str | None = None) -> bytes: ...

    async def stat(self, ref: str, path: str | None = None) -> SkillFileStat: ...

    async def list(self, ref: str) -> builtins.list[str]: ...


def assess_skill_md(
    data: bytes,
    *,
    source_id: str,
    skill_id: str,
    folder_name: str | None,
    location: str,
    extra_diagnostics: tuple[Diagnostic, ...] = (),
) -> SkillEntry | DiscoveryProblem:
    """Load one SKILL.md leniently into an entry, or a problem when it is unusable.

    Never raises for the file's content: :func:`check_skill_md` is fuzzed never to, and should
    a parser bug still surface (``RecursionError``, ``MemoryError`` included), it becomes this
    skill's ``unreadable`` error, so it never hides the rest of the source.
    """
    version = content_version(data)
    try:
        check = check_skill_md(
            data, folder_name=folder_name, file=location, mode=ValidationMode.LENIENT
        )
    except Exception as err:  # a bug (RecursionError, MemoryError): keep it to this file
        message = (
            f"SKILL.md could not be parsed ({type(err).__name__}); skipped. This is a plait "
            "bug: please report it with the file."
        )
        diagnostic = Diagnostic(Severity.ERROR, Code.UNREADABLE, message, location)
        return DiscoveryProblem(source_id, skill_id, location, (diagnostic,), version)
    diagnostics = check.diagnostics + extra_diagnostics
    if check.meta is None:
        return DiscoveryProblem(source_id, skill_id, location, diagnostics, version)
    return SkillEntry(source_id, skill_id, version, location, check.meta, diagnostics)


def assess_cached(
    cache: Mapping[str, tuple[str, DiscoveryItem]],
    data: bytes,
    *,
    source_id: str,
    skill_id: str,
    location: str,
) -> DiscoveryItem:
    """:func:`assess_skill_md` for ``skill_id`` (its folder is the id's last segment), reusing
    ``cache[skill_id]`` while the content version is unchanged."""
    cached = cache.get(skill_id)
    if cached is not None and cached[0] == content_version(data):
        return cached[1]
    return assess_skill_md(
        data,
        source_id=source_id,
        skill_id=skill_id,
        folder_name=skill_id.rsplit("/", 1)[-1],
        location=location,
    )


def body_bytes(data: bytes) -> bytes:
    """The SKILL.md body (frontmatter removed) as UTF-8 bytes."""
    return split_skill_md(data).body.encode("utf-8")
