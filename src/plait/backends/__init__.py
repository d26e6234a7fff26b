"""Blob backends: where middleware writes what it moves out of the context window.

=====================  ==========================================================================
backend                what it is for
=====================  ==========================================================================
``MemoryBackend``      tests and short-lived processes; a dict
``LocalBackend``       files under one directory; atomic rename, confined to the root
``SQLiteBackend``      the embedded default: one file, paged reads with ``substr``
``FsspecBackend``      any fsspec URL (``memory://``, ``file://``, ``s3://`` …); needs
                       ``pip install 'plait[fsspec]'`` (fsspec is imported only when one is built)
``PostgresBackend``    many workers, one database; shares a ``PostgresDatabase`` (pool and
                       migrations) with ``PostgresThreadStore``; needs ``plait[postgres]``
=====================  ==========================================================================

Every backend normalises paths with :func:`plait.paths.normalize_virtual_path` (``..`` raises
:class:`~plait.paths.PathEscapeError`), counts ``offset``/``limit`` in characters, raises
``FileNotFoundError`` naming the path for a missing blob, and lists recursively, sorted.
"""

from __future__ import annotations

from plait.lazy import lazy_exports

TYPE_CHECKING = False  # not typing's: importing this package must not import typing

if TYPE_CHECKING:
    from plait.backends.base import (
        Backend,
        BackendError,
        BackendReadSurface,
        BackendTimeoutError,
        BackendWriteSurface,
    )
    from plait.backends.fsspec import FsspecBackend
    from plait.backends.local import LocalBackend
    from plait.backends.memory import MemoryBackend
    from plait.backends.postgres import PostgresBackend
    from plait.backends.sqlite import SQLiteBackend

__all__ = [
    "Backend",
    "BackendError",
    "BackendReadSurface",
    "BackendTimeoutError",
    "BackendWriteSurface",
    "FsspecBackend",
    "LocalBackend",
    "MemoryBackend",
    "PostgresBackend",
    "SQLiteBackend",
]

# Hidden from type checkers, which then check every name against the imports above.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.backends.base": (
                "Backend",
                "BackendError",
                "BackendReadSurface",
                "BackendTimeoutError",
                "BackendWriteSurface",
            ),
            "plait.backends.fsspec": ("FsspecBackend",),
            "plait.backends.local": ("LocalBackend",),
            "plait.backends.memory": ("MemoryBackend",),
            "plait.backends.postgres": ("PostgresBackend",),
            "plait.backends.sqlite": ("SQLiteBackend",),
        },
    )
