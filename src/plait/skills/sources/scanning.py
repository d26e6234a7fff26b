"""The bookkeeping of one :class:`~plait.skills.sources.filesystem.FilesystemSource` scan: what
it counted (:class:`ScanStats`), the per-skill cache entry, the folders still to visit."""

from __future__ import annotations

import builtins
import os
from dataclasses import dataclass, field

from plait.skills.model import DiscoveryItem

__all__ = [
    "UNSCANNED_SHOWN",
    "CachedSkill",
    "ScanState",
    "ScanStats",
    "Visit",
    "is_dir",
    "names_shown",
]

_Signature = tuple[int, int, int, int]
UNSCANNED_SHOWN = 5
"""How many unscanned folders a ``scan-limit``/``depth-limit`` warning names."""


@dataclass(slots=True)
class ScanStats:
    """What the last scan did: folders looked at, SKILL.md files found, files (re)parsed."""

    folders: int = 0
    skill_files: int = 0
    parsed: int = 0


@dataclass(frozen=True, slots=True)
class CachedSkill:
    """One SKILL.md as the last scan found it: re-read only when its ``stat`` signature moves."""

    path: str
    signature: _Signature
    item: DiscoveryItem
    folder: str
    """The folder reads are served from: the SKILL.md's, or a text link's target's."""
    text_link: bool = False
    """The SKILL.md held only a path (a git symlink checked out as text): its signature says
    nothing of the target's, so the next scan reads both again."""


@dataclass(slots=True)
class Visit:
    """A folder to scan; ``owner`` is the id of the skill whose folder it lies in, if any."""

    path: str
    rel: str
    depth: int
    owner: str | None = None


@dataclass(slots=True)
class ScanState:
    """One scan in progress: its deadline, the new cache, the items found, what it skipped."""

    deadline: float
    cache: dict[str, CachedSkill] = field(default_factory=dict)
    items: list[DiscoveryItem] = field(default_factory=list)
    stats: ScanStats = field(default_factory=ScanStats)
    too_deep: list[str] = field(default_factory=list)
    stopped_by: str | None = None
    unscanned: list[str] = field(default_factory=list)


def names_shown(paths: builtins.list[str]) -> str:
    """The first ``UNSCANNED_SHOWN`` paths, and how many more."""
    shown = ", ".join(paths[:UNSCANNED_SHOWN])
    more = len(paths) - UNSCANNED_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def is_dir(entry: os.DirEntry[str]) -> bool:
    """``entry.is_dir()``, ``False`` when it cannot be told."""
    try:
        return entry.is_dir()
    except OSError:
        return False
