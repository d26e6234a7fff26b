"""The backend seam: where middleware writes what it moves out of the context window.

The seed's write surface is exactly one method, ``write(path, content)``; anything with that
method can receive evicted results and offloaded history. The read surface lets the model page a
written result back and lets a skill source discover skills stored in a backend.

Paths are virtual: POSIX, relative to the backend's root, canonicalised by
:func:`plait.paths.normalize_virtual_path` (no ``..``). ``offset`` and ``limit`` count characters.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = [
    "Backend",
    "BackendError",
    "BackendReadSurface",
    "BackendTimeoutError",
    "BackendWriteSurface",
]

from plait.errors import PlaitError, StoreTimeoutError


class BackendError(PlaitError):
    """A backend could not read or write; the message names the path and the cause."""


class BackendTimeoutError(StoreTimeoutError, BackendError):
    """A backend call got no answer within its deadline and was abandoned (see
    :class:`~plait.errors.StoreTimeoutError`); caught as a :class:`BackendError` too."""


@runtime_checkable
class BackendWriteSurface(Protocol):
    """Anything that can store a text under a path (the seed's ``BackendWriteSurface``)."""

    async def write(self, path: str, content: str) -> object:
        """Store ``content`` at ``path`` atomically, replacing what was there."""
        ...


@runtime_checkable
class BackendReadSurface(Protocol):
    """Reading back what was written."""

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        """Characters ``[offset, offset + limit)`` of the text at ``path``.

        Raises ``FileNotFoundError`` if nothing is stored there.
        """
        ...

    async def exists(self, path: str) -> bool: ...

    async def ls(self, prefix: str = "") -> list[str]:
        """Every stored path under ``prefix`` (recursive), sorted."""
        ...


@runtime_checkable
class Backend(BackendWriteSurface, BackendReadSurface, Protocol):
    """A full backend: write, read, list, delete and ``aclose``.

    The write surface alone (the seed's) needs no ``aclose``: whoever created a backend closes it.
    """

    async def delete(self, path: str) -> bool:
        """Remove ``path``; return whether something was there."""
        ...

    async def aclose(self) -> None:
        """Release what the backend holds open (connections, clients). Idempotent."""
        ...
