"""Skill sources: where skills come from. See :mod:`plait.skills.sources.base` for the protocol."""

from __future__ import annotations

from plait.skills.sources.backend import BackendSource
from plait.skills.sources.base import (
    DEFAULT_IGNORED,
    DEFAULT_MAX_FILE_BYTES,
    SKILL_FILE_NAMES,
    SkillSource,
    assess_skill_md,
)
from plait.skills.sources.filesystem import FilesystemSource, ScanStats
from plait.skills.sources.memory import MemorySource

__all__ = [
    "DEFAULT_IGNORED",
    "DEFAULT_MAX_FILE_BYTES",
    "SKILL_FILE_NAMES",
    "BackendSource",
    "FilesystemSource",
    "MemorySource",
    "ScanStats",
    "SkillSource",
    "assess_skill_md",
]
