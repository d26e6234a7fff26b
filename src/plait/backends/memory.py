"""``MemoryBackend`` — blobs in a dict — and the argument rules every backend applies.

The memory backend is the reference implementation of the contract in
:mod:`plait.backends.base`; the other backends call the same three checks so that they accept and
reject exactly the same paths, pages and texts:

* :func:`virtual_prefix` — an ``ls`` prefix: ``""``, ``"/"`` and ``"."`` mean the root, anything
  else goes through :func:`~plait.paths.normalize_virtual_path`.
* :func:`check_page` — ``offset >= 0`` and ``limit`` is ``None`` or ``>= 0``.
* :func:`encode_text` — the text as UTF-8; a lone surrogate (which no UTF-8 file or SQLite TEXT
  can hold) is refused with its index, in every backend, before anything is written.
"""

from __future__ import annotations

from plait.backends.base import BackendError
from plait.errors import quoted
from plait.paths import normalize_virtual_path

__all__ = ["MemoryBackend", "check_page", "encode_text", "virtual_prefix"]


def virtual_prefix(prefix: str) -> str:
    """The canonical form of an ``ls`` prefix, ``""`` for the root."""
    if all(part in ("", ".") for part in prefix.replace("\\", "/").split("/")):
        return ""
    return normalize_virtual_path(prefix)


def check_page(offset: int, limit: int | None) -> None:
    """Refuse a negative ``offset`` or ``limit`` (Python slicing would silently count from the
    end)."""
    if offset < 0:
        raise BackendError(f"offset must be 0 or more, got {offset}; use 0 to read from the start.")
    if limit is not None and limit < 0:
        raise BackendError(f"limit must be 0 or more, got {limit}; use None to read to the end.")


def encode_text(path: str, content: str) -> bytes:
    """``content`` as UTF-8, or a :class:`BackendError` naming the first lone surrogate."""
    try:
        return content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BackendError(
            f"Cannot write {quoted(path)}: the text has a lone surrogate "
            f"({content[exc.start]!r} at index {exc.start}), which is not valid Unicode. "
            "Encode the data first (e.g. json.dumps) or replace invalid characters."
        ) from exc


class MemoryBackend:
    """A :class:`~plait.backends.base.Backend` in process memory (lost when the process exits).

    Paths are plain keys: ``a`` and ``a/b`` can both hold text (unlike a filesystem). A write
    replaces one dict entry in a single step, so it is atomic by construction.
    """

    def __init__(self, files: dict[str, str] | None = None) -> None:
        """``files`` seeds the backend (keys are normalised; useful in tests)."""
        self._blobs: dict[str, str] = {}
        for path, content in (files or {}).items():
            key = normalize_virtual_path(path)
            encode_text(key, content)
            self._blobs[key] = content

    async def write(self, path: str, content: str) -> str:
        """Store ``content`` at ``path``; returns the normalised path."""
        key = normalize_virtual_path(path)
        encode_text(key, content)
        self._blobs[key] = content
        return key

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        key = normalize_virtual_path(path)
        check_page(offset, limit)
        try:
            text = self._blobs[key]
        except KeyError:
            raise FileNotFoundError(f"No blob at {quoted(key)} in the memory backend.") from None
        return text[offset:] if limit is None else text[offset : offset + limit]

    async def exists(self, path: str) -> bool:
        return normalize_virtual_path(path) in self._blobs

    async def ls(self, prefix: str = "") -> list[str]:
        root = virtual_prefix(prefix)
        if not root:
            return sorted(self._blobs)
        under = root + "/"
        return sorted(p for p in self._blobs if p == root or p.startswith(under))

    async def aclose(self) -> None:
        """Nothing to release: the files stay readable."""

    async def delete(self, path: str) -> bool:
        return self._blobs.pop(normalize_virtual_path(path), None) is not None
