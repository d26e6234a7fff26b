"""Hostile virtual paths never leave a backend's root: ``..``, NUL and empty paths are refused
before any I/O, odd names stay under the root, and a symlinked parent pointing out of the root
blocks writes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.backends import Backend, LocalBackend, MemoryBackend
from plait.backends.base import BackendError
from plait.backends.fsspec import FsspecBackend
from plait.paths import PathEscapeError

Factory = Callable[[Path], Backend]

FACTORIES: dict[str, Factory] = {
    "local": lambda root: LocalBackend(root),
    "fsspec-file": lambda root: FsspecBackend(f"file://{root}"),
    "memory": lambda root: MemoryBackend(),
}


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(params=sorted(FACTORIES))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    root = tmp_path / "root"
    root.mkdir()
    return FACTORIES[request.param](root)


@pytest.mark.parametrize(
    "path", ["..", "../x", "a/../../x", "a\\..\\..\\x", "a/..", "x\x00", "\\\\?\\..\\x", ""]
)
async def test_dot_dot_nul_and_empty_paths_are_refused_before_any_io(
    backend: Backend, path: str
) -> None:
    with pytest.raises(PathEscapeError):
        await backend.write(path, "x")
    with pytest.raises(PathEscapeError):
        await backend.read(path)
    with pytest.raises(PathEscapeError):
        await backend.delete(path)


@pytest.mark.parametrize(
    ("path", "stored"),
    [
        ("/etc/passwd", "etc/passwd"),  # absolute means root-relative
        ("~/x", "~/x"),  # no home expansion
        ("\uff0e\uff0e/x", "\uff0e\uff0e/x"),  # fullwidth dots are a plain name, not '..'
        ("a\\b", "a/b"),  # backslash is a separator
        ("a/./b//c", "a/b/c"),
    ],
)
async def test_odd_paths_stay_under_the_root(
    backend: Backend, tmp_path: Path, path: str, stored: str
) -> None:
    assert await backend.write(path, "x") == stored
    assert await backend.ls() == [stored]
    assert names(tmp_path) == ["root"]
    if not isinstance(backend, MemoryBackend):
        assert (tmp_path / "root" / stored).is_file()


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
@pytest.mark.parametrize("kind", ["local", "fsspec-file"])
async def test_a_symlinked_parent_out_of_the_root_blocks_writes_too(
    tmp_path: Path, kind: str
) -> None:
    root = tmp_path / "root"
    (tmp_path / "outside").mkdir()
    root.mkdir()
    (root / "evicted").symlink_to(tmp_path / "outside", target_is_directory=True)
    backend = FACTORIES[kind](root)
    with pytest.raises((PathEscapeError, BackendError)):
        await backend.write("evicted/t1/x", "planted")
    assert names(tmp_path / "outside") == []
