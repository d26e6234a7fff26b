"""``FsspecBackend``: blobs on any fsspec filesystem (``memory://``, ``file://``, ``s3://`` …).

``fsspec`` is imported when a backend is built, not when this module is imported; without it the
constructor raises a :class:`~plait.backends.base.BackendError` saying
``pip install 'plait[fsspec]'``.

How a write stays atomic, per protocol:

==========================  ====================================================================
protocol                    write
==========================  ====================================================================
``memory``                  one ``pipe_file``: the store entry is replaced in one assignment
``s3``, ``gs``, ``az`` …    one ``pipe_file``: an object PUT is atomic (readers see old or new)
everything else (``file``)  ``pipe_file`` to a hidden ``.plait-<hex>.tmp`` beside the target,
                            then ``mv`` over it (``os.rename`` for ``file``); ``ls`` hides
                            temp files a killed writer leaves behind
==========================  ====================================================================

For the local protocol, every path is also confined with :func:`plait.paths.confine`, so a
symlink under the root that points outside it is refused, and only regular files are listed and
read (as :class:`~plait.backends.local.LocalBackend` does: a FIFO is never opened). Tests
cover ``memory`` and ``file``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from plait.backends.base import BackendError
from plait.backends.local import (
    BlockingBackend,
    confine_on_disk,
    is_temp_name,
    os_failure,
    read_regular_file,
    read_text_page,
    temp_name,
    text_read_errors,
)
from plait.errors import quoted
from plait.paths import confine

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["FsspecBackend"]

_ATOMIC_PUT = frozenset({"memory", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})
_LOCAL = frozenset({"file", "local"})


def _import_fsspec() -> ModuleType:
    try:
        import fsspec
    except ImportError as exc:
        raise BackendError(
            "FsspecBackend needs the fsspec package, which is not installed. "
            "Install it with: pip install 'plait[fsspec]'"
        ) from exc
    module: ModuleType = fsspec
    return module


class FsspecBackend(BlockingBackend):
    """A :class:`~plait.backends.base.Backend` over an fsspec filesystem, under ``root``.

    ``FsspecBackend("s3://bucket/plait")`` builds the filesystem from the URL (extra keyword
    arguments are fsspec storage options); ``FsspecBackend(fs, root="bucket/plait")`` uses a
    filesystem you built. A ``root`` given with a URL is joined under the URL's path. Only the
    memory protocol may have an empty root (the whole in-process store).

    Calls run in a worker thread, so filesystems with blocking I/O do not stall the event loop.
    """

    def __init__(
        self, url_or_fs: str | AbstractFileSystem, *, root: str = "", **storage_options: Any
    ) -> None:
        fsspec = _import_fsspec()
        if isinstance(url_or_fs, str):
            fs, base = fsspec.core.url_to_fs(url_or_fs, **storage_options)
            root = f"{str(base).rstrip('/')}/{root}" if root else str(base)
        else:
            fs = url_or_fs
        protocol = fs.protocol
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        self.fs: AbstractFileSystem = fs
        self.root: str = str(fs._strip_protocol(root)).rstrip("/") if root else ""
        self._atomic_put = bool(protocols & _ATOMIC_PUT)
        self._local = bool(protocols & _LOCAL)
        if not self.root and "memory" not in protocols:
            raise BackendError(
                f"FsspecBackend over {sorted(protocols)} needs a root directory or bucket, "
                "e.g. FsspecBackend('s3://bucket/plait') or FsspecBackend(fs, root='/data/plait')."
            )

    @property
    def url(self) -> str:
        """The root as a URL, for messages."""
        return str(self.fs.unstrip_protocol(self.root or "/"))

    def _full(self, key: str, action: str) -> str:
        if self._local:
            confine_on_disk(Path(self.root), key, action)
        return f"{self.root}/{key}"

    def _write(self, key: str, data: bytes) -> None:
        full = self._full(key, "write")
        try:
            if self.fs.isdir(full):
                raise BackendError(
                    f"Cannot write {quoted(key)}: a directory is there; write to a path inside it."
                )
            if self._atomic_put:
                self.fs.pipe_file(full, data)
                return
            parent = str(self.fs._parent(full))
            self.fs.makedirs(parent, exist_ok=True)
            temp = f"{parent}/{temp_name()}"
            try:
                self.fs.pipe_file(temp, data)
                self.fs.mv(temp, full)
            except BaseException:
                with contextlib.suppress(OSError):
                    self.fs.rm_file(temp)
                raise
        except OSError as exc:
            raise os_failure(key, "write", exc) from exc

    def _read(self, key: str, offset: int, limit: int | None) -> str:
        full = self._full(key, "read")
        if self._local:  # never open a FIFO or device (see read_regular_file)
            return read_regular_file(full, key, repr(self.url), offset, limit)
        with text_read_errors(key, repr(self.url)):
            if self._atomic_put:
                # One GET; the memory protocol also hands every reader the same file object,
                # so streaming from it in two threads at once would share one position.
                data: bytes = self.fs.cat_file(full)
                text = data.decode("utf-8")
                return text[offset:] if limit is None else text[offset : offset + limit]
            with self.fs.open(full, "r", encoding="utf-8", newline="") as file:
                return read_text_page(file, offset, limit)

    def _exists(self, key: str) -> bool:
        return bool(self.fs.isfile(self._full(key, "check")))

    def _ls(self, prefix: str) -> list[str]:
        base = self._full(prefix, "list") if prefix else self.root
        start = len(self.root) + 1
        found: list[str] = []
        for name in self.fs.find(base):
            name = str(name)
            key = name[start:]
            if not name.startswith(self.root + "/") or is_temp_name(key.rsplit("/", 1)[-1]):
                continue
            if self._local and not self._is_confined(key):
                continue
            found.append(key)
        return sorted(found)

    def _is_confined(self, key: str) -> bool:
        """Inside the root and a regular file (not a FIFO, socket or device)."""
        try:
            return confine(Path(self.root), key).is_file()
        except (ValueError, OSError, RuntimeError):
            return False

    def _delete(self, key: str) -> bool:
        full = self._full(key, "delete")
        try:
            if not self.fs.isfile(full):
                return False
            self.fs.rm_file(full)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise os_failure(key, "delete", exc) from exc
        return True
