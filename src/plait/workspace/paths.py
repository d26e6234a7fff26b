"""Where a model's path lands: inside the workspace root, or refused.

=====================================  ========================================================
path the model gives                   what it names
=====================================  ========================================================
``notes/a.txt``, ``./notes/a.txt``     ``<root>/notes/a.txt``
``/abs/path`` inside the root          that path (models often repeat absolute paths they saw)
``/abs/path`` outside the root         refused (:class:`~plait.paths.PathEscapeError`),
                                       ``/proc``, ``/etc`` and ``~`` included
``..`` anywhere, a NUL byte            refused before the file system is touched
a symlink that leads out of the root   refused: the resolved target must stay inside
=====================================  ========================================================

The check resolves symlinks first, so a link planted inside the workspace cannot reach out; a
path that does not exist yet (a file to write) resolves through its nearest existing folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from plait.paths import PathEscapeError, confine

__all__ = ["WorkspaceRoot"]


class WorkspaceRoot:
    """A folder the workspace tools are confined to (resolved once, when built)."""

    __slots__ = ("path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        resolved = Path(path).expanduser().resolve()
        if not resolved.is_dir():
            raise NotADirectoryError(f"workspace root {str(resolved)!r} is not a folder")
        self.path = resolved

    def resolve(self, path: str) -> Path:
        """The real path ``path`` names inside the root (see the module table)."""
        if not isinstance(path, str) or not path.strip():
            raise PathEscapeError(str(path), "it is empty")
        text = path.strip()
        if "\x00" in text:
            raise PathEscapeError(path, "it contains a NUL byte")
        if ".." in text.replace("\\", "/").split("/"):
            raise PathEscapeError(path, "it contains a '..' segment")
        if text.startswith("~"):
            raise PathEscapeError(path, f"it is outside the workspace {str(self.path)!r}")
        if os.path.isabs(text):
            target = Path(text).resolve()
            if target != self.path and self.path not in target.parents:
                raise PathEscapeError(path, f"it is outside the workspace {str(self.path)!r}")
            return target
        if text in (".", "./"):
            return self.path
        return confine(self.path, text)

    def relative(self, target: Path) -> str:
        """``target`` as the model should write it: relative to the root (``.`` for the root)."""
        try:
            rel = target.relative_to(self.path)
        except ValueError:
            return str(target)
        return str(rel) if str(rel) != "." else "."
