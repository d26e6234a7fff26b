"""Review regressions for backend paths: unicode and very long names, and a lone surrogate in a
path, which must give every backend either a working path or a typed ``BackendError``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from plait.backends import (
    Backend,
    BackendError,
    FsspecBackend,
    LocalBackend,
    MemoryBackend,
    SQLiteBackend,
)

BACKENDS = ["memory", "local", "sqlite", "fsspec-memory", "fsspec-file"]


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    kind = request.param
    if kind == "memory":
        yield MemoryBackend()
    elif kind == "local":
        yield LocalBackend(tmp_path / "root")
    elif kind == "sqlite":
        sqlite_backend = SQLiteBackend(tmp_path / "blobs.db")
        yield sqlite_backend
        await sqlite_backend.aclose()
    elif kind == "fsspec-memory":
        yield FsspecBackend("memory://", root=f"/review-{tmp_path.name}")
    else:
        yield FsspecBackend(f"file://{tmp_path / 'fs'}")


async def test_unicode_paths_round_trip_and_list(backend: Backend) -> None:
    path = "ü/名前/" + "é" * 100 + ".txt"
    await backend.write(path, "données")
    assert await backend.read(path) == "données"
    assert await backend.ls("ü") == [path]
    assert await backend.ls("ü/名") == []  # a prefix is a folder, not a string prefix


async def test_a_lone_surrogate_in_a_path_works_or_is_a_backend_error(backend: Backend) -> None:
    path = "s/\udc80name"
    actions: list[Callable[[], Awaitable[object]]] = [
        lambda: backend.write(path, "v"),
        lambda: backend.read(path),
        lambda: backend.exists(path),
        lambda: backend.delete(path),
        lambda: backend.ls("s/\udc80"),
    ]
    for action in actions:
        # Typed, or it worked; anything else (a driver's UnicodeEncodeError) fails the test.
        with contextlib.suppress(BackendError, FileNotFoundError):
            await action()


async def test_sqlite_names_the_lone_surrogate(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "blobs.db")
    try:
        with pytest.raises(BackendError, match="lone surrogate"):
            await backend.write("s/\udc80name", "v")
        with pytest.raises(BackendError, match="lone surrogate"):
            await backend.ls("s/\udc80")
    finally:
        await backend.aclose()
