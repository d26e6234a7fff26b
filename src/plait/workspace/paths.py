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
The file tools then open what the check returned through :meth:`WorkspaceRoot.folder_of`, one
folder at a time from the root with no symlink followed, so a folder swapped for a link after
the check (a race run from ``shell``) is refused rather than followed out of the root.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
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
        try:
            target = self._resolve(path)
        except RuntimeError:  # Python 3.11's Path.resolve() on a symlink loop
            raise PathEscapeError(path, "it goes through a symlink loop") from None
        # Python 3.13's resolve() returns a looping link unresolved instead of raising: a resolved
        # path still holding a link is one.
        current = self.path
        for part in target.relative_to(self.path).parts if target != self.path else ():
            current = current / part
            if current.is_symlink():
                raise PathEscapeError(path, "it goes through a symlink loop")
        return target

    def _resolve(self, path: str) -> Path:
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

    @contextlib.contextmanager
    def folder_of(self, target: Path, *, make: bool = False) -> Iterator[tuple[int, str]]:
        """``(fd of the folder holding target, target's name)`` for a ``target`` that
        :meth:`resolve` returned, each folder opened from the root without following a symlink
        (``make``: missing folders are created); a link found on the way appeared after the
        check and is refused with :class:`~plait.paths.PathEscapeError`. Open the name with
        ``dir_fd=`` and ``O_NOFOLLOW``; the fd is closed on exit."""
        names = target.relative_to(self.path).parts
        if not names:
            raise PathEscapeError(str(target), "it is the workspace folder itself")
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        folder = os.open(self.path, flags)
        try:
            for name in names[:-1]:
                try:
                    inner = _open_folder(folder, name, flags, make)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise PathEscapeError(
                            str(target), f"{name!r} is no longer a folder (a link appeared)"
                        ) from None
                    raise
                os.close(folder)
                folder = inner
            yield folder, names[-1]
        finally:
            os.close(folder)

    def relative(self, target: Path) -> str:
        """``target`` as the model should write it: relative to the root (``.`` for the root)."""
        try:
            rel = target.relative_to(self.path)
        except ValueError:
            return str(target)
        return str(rel) if str(rel) != "." else "."


def _open_folder(parent: int, name: str, flags: int, make: bool) -> int:
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        if not make:
            raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=parent)
    return os.open(name, flags, dir_fd=parent)
