"""FsspecBackend: lazy import, URL and filesystem construction, per-protocol atomic writes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pytest

from plait.backends import BackendError, FsspecBackend, LocalBackend
from plait.paths import PathEscapeError


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def memory_url() -> str:
    return f"memory://plait-tests/{uuid.uuid4().hex}"


def test_importing_plait_backends_does_not_import_fsspec() -> None:
    code = "import sys, plait.backends; print('fsspec' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


def test_without_fsspec_the_constructor_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(BackendError, match=r"pip install 'plait\[fsspec\]'"):
        FsspecBackend("memory://x")


async def test_a_url_and_a_filesystem_with_root_address_the_same_blobs() -> None:
    url = memory_url()
    by_url = FsspecBackend(url)
    by_fs = FsspecBackend(fsspec.filesystem("memory"), root=url.removeprefix("memory://"))
    await by_url.write("a/b", "shared")
    assert await by_fs.read("a/b") == "shared"
    assert by_fs.url == by_url.url
    assert by_url.fs.cat_file(f"{by_url.root}/a/b") == b"shared"


async def test_a_root_given_with_a_url_is_joined_under_it(tmp_path: Path) -> None:
    backend = FsspecBackend(tmp_path.as_uri(), root="sub/dir")
    await backend.write("f", "x")
    assert (tmp_path / "sub" / "dir" / "f").read_text() == "x"


def test_an_empty_root_is_refused_outside_the_memory_protocol() -> None:
    with pytest.raises(BackendError, match="needs a root"):
        FsspecBackend(fsspec.filesystem("file"))


async def test_memory_protocol_writes_with_one_pipe_and_no_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = FsspecBackend(memory_url())

    def no_move(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("memory writes must not go through a temp key")

    monkeypatch.setattr(backend.fs, "mv", no_move)
    await backend.write("f", "one step")
    assert await backend.read("f") == "one step"


async def test_file_protocol_writes_a_temp_file_then_moves_it_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = FsspecBackend(tmp_path.as_uri())
    await backend.write("dir/f", "old")
    moves: list[tuple[str, str]] = []
    real_mv = backend.fs.mv

    def recording_mv(src: str, dst: str, **kwargs: Any) -> None:
        moves.append((src, dst))
        real_mv(src, dst, **kwargs)

    monkeypatch.setattr(backend.fs, "mv", recording_mv)
    await backend.write("dir/f", "new")
    assert await backend.read("dir/f") == "new"
    [(src, dst)] = moves
    assert dst == f"{backend.root}/dir/f"
    assert src.rsplit("/", 1)[1].startswith(".plait-")


async def test_a_failed_move_keeps_the_old_text_and_removes_the_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = FsspecBackend(tmp_path.as_uri())
    await backend.write("dir/f", "old")

    def failing_mv(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(backend.fs, "mv", failing_mv)
    with pytest.raises(BackendError, match="permission denied"):
        await backend.write("dir/f", "new")
    monkeypatch.undo()
    assert await backend.read("dir/f") == "old"
    assert names(tmp_path / "dir") == ["f"]


async def test_file_protocol_refuses_symlink_escapes(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("top secret")
    (root / "leak").symlink_to(outside / "secret")
    (root / "door").symlink_to(outside, target_is_directory=True)
    backend = FsspecBackend(root.as_uri())
    with pytest.raises(PathEscapeError):
        await backend.read("leak")
    with pytest.raises(PathEscapeError):
        await backend.write("door/new", "escaped")
    with pytest.raises(PathEscapeError):
        await backend.delete("leak")
    assert await backend.ls() == []
    assert names(outside) == ["secret"]


async def test_memory_protocol_refuses_parent_that_is_a_file() -> None:
    backend = FsspecBackend(memory_url())
    await backend.write("file", "x")
    with pytest.raises(BackendError, match="a parent of this path is a file"):
        await backend.write("file/child", "y")
    assert await backend.read("file") == "x"


async def test_backends_on_different_roots_do_not_see_each_other() -> None:
    first, second = FsspecBackend(memory_url()), FsspecBackend(memory_url())
    await first.write("only-here", "x")
    assert await second.ls() == []
    assert not await second.exists("only-here")


@pytest.mark.parametrize("depth", [129, 3000])
async def test_a_path_nested_thousands_deep_is_a_typed_error(tmp_path: Path, depth: int) -> None:
    deep = "/".join(["a"] * depth)
    for backend in (FsspecBackend(memory_url()), FsspecBackend(f"file://{tmp_path}")):
        with pytest.raises(PathEscapeError, match=r"nested deeper than 128|longer than 16384"):
            await backend.write(deep, "x")
        with pytest.raises(PathEscapeError, match=r"nested deeper than 128|longer than 16384"):
            await backend.read(deep)
        with pytest.raises(PathEscapeError, match=r"nested deeper than 128|longer than 16384"):
            await backend.ls(deep)
    assert names(tmp_path) == []


async def test_a_path_128_levels_deep_still_works(tmp_path: Path) -> None:
    deep = "/".join(["a"] * 128)
    backend = FsspecBackend(f"file://{tmp_path}")
    await backend.write(deep, "x")
    assert await backend.read(deep) == "x"
    assert await backend.ls() == [deep]


@pytest.mark.parametrize("kind", ["fsspec", "local"])
async def test_a_tree_nested_thousands_deep_under_the_root_is_a_backend_error(kind: str) -> None:
    # Not under tmp_path: pytest's own cleanup (shutil.rmtree) would overflow on this tree.
    tmp_path = Path(tempfile.mkdtemp())
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(1500):  # made with dir_fd: the full path is longer than PATH_MAX
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    try:
        with pytest.raises(BackendError, match="nested too deep to walk"):
            backend = (
                FsspecBackend(f"file://{tmp_path}") if kind == "fsspec" else LocalBackend(tmp_path)
            )
            await backend.ls()
    finally:
        remove_chain(tmp_path / "d")
        os.rmdir(tmp_path)


def remove_chain(top: Path) -> None:
    """Remove a chain of nested ``d`` folders one level at a time (shutil.rmtree recurses)."""
    while top.exists():
        inner = top / "d"
        if inner.exists():
            inner.rename(top.with_name("next"))
            top.rmdir()
            top.with_name("next").rename(top)
        else:
            top.rmdir()
