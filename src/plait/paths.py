"""Path confinement, shared by every component that takes a path from a model or a skill.

Two shapes of path exist in plait:

* *virtual* paths inside a backend or a skill (``results/abc.txt``): POSIX, relative, no ``..``,
  no empty or ``.`` segments, no NUL. :func:`normalize_virtual_path` canonicalises one or raises.
* *real* paths on disk under a root: :func:`confine` joins a virtual path to the root, resolves
  symlinks, and refuses anything that lands outside the root.
"""

from __future__ import annotations

from pathlib import Path

from plait.errors import PlaitError, quoted

__all__ = [
    "MAX_PATH_CHARS",
    "MAX_PATH_DEPTH",
    "PathEscapeError",
    "confine",
    "normalize_virtual_path",
]

MAX_PATH_DEPTH = 128
"""The most segments a virtual path may have (``a/b/c`` has 3). Deeper paths are refused before
any filesystem sees them: walking thousands of levels overflows recursive directory code."""

MAX_PATH_CHARS = 16_384
"""The longest virtual path accepted, in characters. A filesystem may refuse shorter ones
(Linux's ``PATH_MAX`` is 4096 bytes); backends report that as their own error."""


class PathEscapeError(PlaitError, ValueError):
    """A path tried to leave its root (``..``, an absolute path, a symlink pointing outside)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"Path {quoted(path)} is not allowed: {reason}. Use a path relative to the root, "
            "without '..' segments."
        )


def normalize_virtual_path(path: str) -> str:
    """Canonical form of a root-relative POSIX path.

    A leading ``/`` is accepted and dropped (``/a/b`` means ``a/b`` under the root); backslashes
    are treated as separators. ``..`` anywhere, NUL bytes, an empty path, a path longer than
    :data:`MAX_PATH_CHARS` characters and one deeper than :data:`MAX_PATH_DEPTH` segments are
    refused with :class:`PathEscapeError`.
    """
    if "\x00" in path:
        raise PathEscapeError(path, "it contains a NUL byte")
    if len(path) > MAX_PATH_CHARS:
        raise PathEscapeError(path, f"it is longer than {MAX_PATH_CHARS} characters")
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise PathEscapeError(path, "it contains a '..' segment")
    if not parts:
        raise PathEscapeError(path, "it is empty")
    if len(parts) > MAX_PATH_DEPTH:
        raise PathEscapeError(path, f"it is nested deeper than {MAX_PATH_DEPTH} levels")
    return "/".join(parts)


def confine(root: Path, path: str) -> Path:
    """Resolve ``path`` (relative to ``root``) on disk, following symlinks, and make sure the
    result is still inside ``root``. Returns the resolved absolute path."""
    relative = normalize_virtual_path(path)
    base = root.resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise PathEscapeError(path, "it resolves outside its root (through a symlink)")
    return target
