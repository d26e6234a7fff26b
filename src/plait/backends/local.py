"""``LocalBackend``: blobs as UTF-8 files under one root directory.

Every path is confined with :func:`plait.paths.confine`: ``..`` is refused before any I/O, and a
symlink (anywhere in the path) that resolves outside the root is refused on read, write, exists,
delete and ``ls``. A FIFO, socket or device under the root is never listed, and reading one is
``FileNotFoundError`` (opening a FIFO would wait for a writer forever). Confinement guards
against paths chosen by a model or a skill; it does not defend against another local process
swapping directories for symlinks while a call runs.

A write goes to a hidden temp file in the target's directory (``.plait-<hex>.tmp``), is flushed
and fsynced, then renamed over the target with :func:`os.replace`. A reader therefore sees the
old text or the new one, never a partial file, even if the writer is killed; a killed writer can
leave a temp file behind, which ``ls`` never lists. Files are written and read as bytes/UTF-8
with no newline translation, so ``"\\r\\n"`` comes back as written.

OS failures (a name longer than the filesystem allows, a full disk, a permission) become a
:class:`~plait.backends.base.BackendError` that says what to change.
"""

from __future__ import annotations

import asyncio
import errno
import os
import secrets
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from plait.backends.base import BackendError
from plait.backends.memory import check_page, encode_text, virtual_prefix
from plait.errors import quoted
from plait.paths import MAX_PATH_DEPTH, confine, normalize_virtual_path

__all__ = [
    "BlockingBackend",
    "LocalBackend",
    "confine_on_disk",
    "is_temp_name",
    "os_failure",
    "read_regular_file",
    "read_text_page",
    "temp_name",
    "text_read_errors",
]

T = TypeVar("T")

_TEMP_PREFIX = ".plait-"
_TEMP_SUFFIX = ".tmp"
_SKIP_CHUNK = 1 << 20

_ADVICE = {
    errno.ENAMETOOLONG: "a name in the path is longer than the filesystem allows (usually 255 "
    "bytes per name); use shorter names, for example a hash of the long one",
    errno.EACCES: "permission denied; give this process access to the backend root",
    errno.EPERM: "operation not permitted; give this process access to the backend root",
    errno.ENOSPC: "the disk is full; free space or point the backend at another root",
    errno.EDQUOT: "the disk quota is exhausted; free space or point the backend at another root",
    errno.EROFS: "the filesystem is read-only; point the backend at a writable root",
    errno.ENOTDIR: "a parent of this path is a file; use another path or delete that file",
    errno.EEXIST: "a parent of this path is a file; use another path or delete that file",
    errno.EISDIR: "a directory is there; use a path inside it",
    errno.ELOOP: "the path runs through a symlink loop; remove the loop",
}


def temp_name() -> str:
    """A fresh name for the hidden file a write goes to before it is renamed into place."""
    return f"{_TEMP_PREFIX}{secrets.token_hex(8)}{_TEMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    """Whether a file name is an in-flight (or abandoned) write's temp file."""
    return name.startswith(_TEMP_PREFIX) and name.endswith(_TEMP_SUFFIX)


# fsspec filesystems often raise these without an errno.
_ERRNO_OF_TYPE: dict[type[OSError], int] = {
    FileExistsError: errno.EEXIST,
    NotADirectoryError: errno.ENOTDIR,
    IsADirectoryError: errno.EISDIR,
    PermissionError: errno.EACCES,
}


def os_failure(path: str, action: str, exc: OSError) -> BackendError:
    """A :class:`BackendError` for an OS error while doing ``action`` on ``path``."""
    code = exc.errno or _ERRNO_OF_TYPE.get(type(exc), 0)
    advice = _ADVICE.get(code, "check the backend root's permissions and free space")
    cause = exc.strerror or type(exc).__name__
    return BackendError(f"Cannot {action} {quoted(path)}: {cause}; {advice}.")


def confine_on_disk(root: Path, key: str, action: str) -> Path:
    """:func:`~plait.paths.confine`, with a symlink loop or an OS error as a ``BackendError``
    (an escape still raises :class:`~plait.paths.PathEscapeError`)."""
    try:
        return confine(root, key)
    except RuntimeError as exc:  # Python 3.11 reports a symlink loop as RuntimeError
        raise BackendError(f"Cannot {action} {quoted(key)}: {exc}; remove the loop.") from exc
    except OSError as exc:
        raise os_failure(key, action, exc) from exc


@contextmanager
def text_read_errors(key: str, where: str) -> Iterator[None]:
    """Turn what reading a stored file raises into the contract's errors: nothing there (or a
    directory) is ``FileNotFoundError`` naming ``key``; anything else is a ``BackendError``."""
    try:
        yield
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"No file at {quoted(key)} under {where}.") from None
    except IsADirectoryError:
        raise FileNotFoundError(
            f"{quoted(key)} is a directory under {where}, not a file; list it with ls()."
        ) from None
    except UnicodeDecodeError as exc:
        raise BackendError(
            f"Cannot read {quoted(key)}: it is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "this backend only reads files it could have written."
        ) from exc
    except OSError as exc:
        raise os_failure(key, "read", exc) from exc


def read_text_page(stream: IO[str], offset: int, limit: int | None) -> str:
    """Characters ``[offset, offset + limit)`` of a text stream, skipping in bounded chunks so a
    page near the end of a large file never holds the whole file in memory."""
    remaining = offset
    while remaining > 0:
        skipped = stream.read(min(remaining, _SKIP_CHUNK))
        if not skipped:
            return ""
        remaining -= len(skipped)
    return stream.read() if limit is None else stream.read(limit)


def read_regular_file(
    path: str | Path, key: str, where: str, offset: int, limit: int | None
) -> str:
    """A page of the UTF-8 file at ``path`` (see :func:`read_text_page`), errors as in
    :func:`text_read_errors`. Only a regular file is read: a directory, FIFO, socket or device
    is ``FileNotFoundError``; the file is opened non-blocking, as opening a FIFO for reading
    would otherwise wait for a writer forever."""
    with text_read_errors(key, where):
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise FileNotFoundError(
                f"{quoted(key)} is a directory under {where}, not a file; list it with ls()."
            )
        raise FileNotFoundError(
            f"{quoted(key)} is not a regular file (a FIFO, socket or device) under {where}; "
            "a backend reads only files."
        )
    with text_read_errors(key, where), open(fd, encoding="utf-8", newline="") as file:
        return read_text_page(file, offset, limit)


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread. Paths are bounded (:data:`~plait.paths.MAX_PATH_DEPTH`),
    but a tree someone else nested thousands deep under the root can still overflow recursive
    directory code (``os.walk``, fsspec's ``find``): that is a ``BackendError``, not a crash."""
    try:
        return await asyncio.to_thread(fn, *args)
    except RecursionError as exc:
        raise _too_deep() from exc


def _too_deep() -> BackendError:
    return BackendError(
        "The backend root holds directories nested too deep to walk; "
        "flatten or remove them, or list a deeper prefix."
    )


class BlockingBackend(ABC):
    """The async surface of a backend whose storage calls block (files, fsspec).

    Each method checks its arguments on the event loop — the path through
    :func:`~plait.paths.normalize_virtual_path`, the page, the text's encoding — then runs the
    subclass's synchronous ``_write``/``_read``/``_exists``/``_ls``/``_delete`` in a worker
    thread, with the normalised path (``""`` for the root in ``_ls``).
    """

    async def write(self, path: str, content: str) -> str:
        """Store ``content`` at ``path`` atomically; returns the normalised path."""
        key = normalize_virtual_path(path)
        data = encode_text(key, content)
        await _in_thread(self._write, key, data)
        return key

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        key = normalize_virtual_path(path)
        check_page(offset, limit)
        return await _in_thread(self._read, key, offset, limit)

    async def exists(self, path: str) -> bool:
        return await _in_thread(self._exists, normalize_virtual_path(path))

    async def ls(self, prefix: str = "") -> list[str]:
        return await _in_thread(self._ls, virtual_prefix(prefix))

    async def aclose(self) -> None:
        """Nothing held open between calls; a subclass that holds a client overrides this."""
        return None

    async def delete(self, path: str) -> bool:
        return await _in_thread(self._delete, normalize_virtual_path(path))

    @abstractmethod
    def _write(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _read(self, key: str, offset: int, limit: int | None) -> str: ...

    @abstractmethod
    def _exists(self, key: str) -> bool: ...

    @abstractmethod
    def _ls(self, prefix: str) -> list[str]: ...

    @abstractmethod
    def _delete(self, key: str) -> bool: ...


class LocalBackend(BlockingBackend):
    """A :class:`~plait.backends.base.Backend` over a directory (created on the first write)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _confine(self, key: str, action: str) -> Path:
        return confine_on_disk(self.root, key, action)

    def _write(self, key: str, data: bytes) -> None:
        target = self._confine(key, "write")
        try:
            if target.is_dir():
                raise BackendError(
                    f"Cannot write {quoted(key)}: a directory is there; write to a path inside it."
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.parent / temp_name()
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temp, target)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise os_failure(key, "write", exc) from exc

    def _read(self, key: str, offset: int, limit: int | None) -> str:
        target = self._confine(key, "read")
        return read_regular_file(target, key, repr(str(self.root)), offset, limit)

    def _exists(self, key: str) -> bool:
        target = self._confine(key, "check")
        try:
            return target.is_file()
        except OSError as exc:
            raise os_failure(key, "check", exc) from exc

    def _ls(self, prefix: str) -> list[str]:
        base = self.root.resolve()
        if prefix:
            self._confine(prefix, "list")
        start = base / prefix if prefix else base
        try:
            if start.is_file():
                return [] if is_temp_name(start.name) else [prefix]
        except OSError as exc:
            raise os_failure(prefix, "list", exc) from exc
        found: list[str] = []
        # followlinks=False: a symlinked directory is not descended (its files stay readable).
        # The depth is bounded here, not by the interpreter's recursion limit: os.walk recurses
        # before Python 3.13 and iterates from 3.13 on; no valid key is deeper than MAX_PATH_DEPTH.
        for dirpath, _, filenames in os.walk(start):
            if os.path.relpath(dirpath, base).count(os.sep) >= MAX_PATH_DEPTH:
                raise _too_deep()
            for name in filenames:
                if is_temp_name(name):
                    continue
                full = os.path.join(dirpath, name)
                relative = os.path.relpath(full, base).replace(os.sep, "/")
                if not self._listable(full, relative):
                    continue
                found.append(relative)
        return sorted(found)

    def _listable(self, full: str, relative: str) -> bool:
        """A regular file, or a symlink to one inside the root (not a FIFO, socket, device)."""
        try:
            mode = os.lstat(full).st_mode
        except OSError:
            return False  # gone since the walk saw it
        if stat.S_ISLNK(mode):
            return self._is_confined_file(relative)
        return stat.S_ISREG(mode)

    def _is_confined_file(self, key: str) -> bool:
        try:
            return confine(self.root, key).is_file()
        except (ValueError, OSError, RuntimeError):
            return False

    def _delete(self, key: str) -> bool:
        target = self._confine(key, "delete")
        try:
            if target.is_dir():
                return False
            target.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise os_failure(key, "delete", exc) from exc
        return True
