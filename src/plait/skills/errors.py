"""Errors the skills package raises on purpose. Discovery never raises them for a broken skill
(that becomes a :class:`~plait.skills.diagnostics.Diagnostic`); they come from explicit requests
such as "read this file of that skill". Path escapes raise :class:`plait.paths.PathEscapeError`.
"""

from __future__ import annotations

from plait.errors import PlaitError, quoted

__all__ = [
    "SkillError",
    "SkillFileNotFound",
    "SkillFileTooLarge",
    "SkillFileUnreadable",
    "SkillNotFound",
    "SkillSourceError",
]

_MAX_LISTED = 20
_FIND_HINT = "Check the name (run 'plait skills list PATH') or add the folder that holds it."


def _listing(names: list[str]) -> str:
    if not names:
        return "(none)"
    shown = ", ".join(names[:_MAX_LISTED])
    more = len(names) - _MAX_LISTED
    return f"{shown}, and {more} more" if more > 0 else shown


class SkillError(PlaitError):
    """Base class of the skills package's errors."""


class SkillNotFound(SkillError, LookupError):
    """No skill with that name (or id) is known; the message lists the known ones."""

    def __init__(
        self, name: str, known: list[str], *, where: str = "", hint: str = _FIND_HINT
    ) -> None:
        self.name = name
        self.known = sorted(known)
        place = f" in {where}" if where else ""
        super().__init__(
            f"Skill {quoted(name)} not found{place}. Known skills: {_listing(self.known)}. {hint}"
        )


class SkillFileNotFound(SkillError, FileNotFoundError):
    """A skill exists but has no file at the requested path; the message lists its files."""

    def __init__(self, skill: str, path: str, available: list[str]) -> None:
        self.skill = skill
        self.path = path
        self.available = available
        super().__init__(
            f"Skill {quoted(skill)} has no file {quoted(path)}. Its files: {_listing(available)}. "
            "Use a path relative to the skill folder, e.g. 'references/REFERENCE.md'."
        )


class SkillSourceError(SkillError):
    """A skill source as a whole cannot be used (missing root, unreadable backend, ...)."""


class SkillFileTooLarge(SkillError):
    """A skill file (or all a skill's files) is over a size cap; ``size`` is ``None`` when the
    file was not read far enough to know it."""

    def __init__(
        self, path: str, size: int | None, limit: int, setting: str = "max_file_bytes"
    ) -> None:
        self.path = path
        self.size = size
        self.limit = limit
        how_big = "is larger than" if size is None else f"is {size} bytes, over"
        super().__init__(
            f"{quoted(path)} {how_big} the {limit}-byte limit ({setting}). Make it smaller, or "
            f"raise {setting}."
        )


class SkillFileUnreadable(SkillError):
    """A skill path exists but is not a regular file (a FIFO, socket or device)."""

    def __init__(self, skill: str, path: str, kind: str) -> None:
        self.skill = skill
        self.path = path
        super().__init__(
            f"Skill {quoted(skill)}: {quoted(path)} is a {kind}, not a regular file; skill "
            "files are read only when they are regular files. Replace it with a file."
        )
