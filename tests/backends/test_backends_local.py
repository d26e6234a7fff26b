"""LocalBackend: atomic rename, symlink confinement, OS errors as BackendError."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from plait.backends import BackendError, LocalBackend
from plait.backends.fsspec import FsspecBackend
from plait.paths import PathEscapeError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret")
    return path


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def temp_files(directory: Path) -> list[str]:
    return [name for name in names(directory) if name.startswith(".plait-")]


async def test_files_land_under_the_root_with_their_virtual_path(root: Path) -> None:
    backend = LocalBackend(root)
    await backend.write("results/call 1.txt", "data")
    assert (root / "results" / "call 1.txt").read_text() == "data"


async def test_the_root_is_created_on_first_write_and_ls_of_a_missing_root_is_empty(
    tmp_path: Path,
) -> None:
    backend = LocalBackend(tmp_path / "not" / "yet")
    assert await backend.ls() == []
    assert not await backend.exists("f")
    await backend.write("f", "x")
    assert (tmp_path / "not" / "yet" / "f").read_text() == "x"


async def test_symlinked_file_pointing_outside_is_refused_everywhere(
    root: Path, outside: Path
) -> None:
    (root / "leak").symlink_to(outside / "secret.txt")
    backend = LocalBackend(root)
    with pytest.raises(PathEscapeError, match="outside its root"):
        await backend.read("leak")
    with pytest.raises(PathEscapeError):
        await backend.write("leak", "overwritten")
    with pytest.raises(PathEscapeError):
        await backend.exists("leak")
    with pytest.raises(PathEscapeError):
        await backend.delete("leak")
    assert await backend.ls() == []
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_symlinked_directory_pointing_outside_is_refused(root: Path, outside: Path) -> None:
    (root / "door").symlink_to(outside, target_is_directory=True)
    backend = LocalBackend(root)
    with pytest.raises(PathEscapeError):
        await backend.write("door/new.txt", "escaped")
    with pytest.raises(PathEscapeError):
        await backend.read("door/secret.txt")
    with pytest.raises(PathEscapeError):
        await backend.ls("door")
    assert await backend.ls() == []
    assert names(outside) == ["secret.txt"]


async def test_a_root_that_is_itself_a_symlink_works(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    backend = LocalBackend(alias)
    await backend.write("a/b", "through the alias")
    assert await backend.read("a/b") == "through the alias"
    assert await backend.ls() == ["a/b"]


async def test_symlinks_inside_the_root_are_followed(root: Path) -> None:
    backend = LocalBackend(root)
    await backend.write("real/file", "inside")
    (root / "alias").symlink_to(root / "real" / "file")
    assert await backend.read("alias") == "inside"
    assert await backend.ls() == ["alias", "real/file"]


async def test_a_symlink_loop_gives_a_backend_error(root: Path) -> None:
    (root / "loop").symlink_to(root / "loop")
    backend = LocalBackend(root)
    with pytest.raises(BackendError, match="loop"):
        await backend.read("loop/x")


async def test_an_exception_during_write_keeps_the_old_file_and_cleans_up(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = LocalBackend(root)
    await backend.write("dir/f", "old text")

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(BackendError, match="disk is full"):
        await backend.write("dir/f", "new text that never lands")
    monkeypatch.undo()
    assert await backend.read("dir/f") == "old text"
    assert temp_files(root / "dir") == []


_KILLED_WRITER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from plait.backends import LocalBackend

    def stall(src, dst):
        print("written", flush=True)
        time.sleep(60)

    os.replace = stall
    asyncio.run(LocalBackend(sys.argv[1]).write("f", "N" * 3_000_000))
    """
)


async def test_a_writer_killed_mid_write_leaves_the_old_text_and_no_partial_file(
    root: Path,
) -> None:
    backend = LocalBackend(root)
    await backend.write("f", "old text")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _KILLED_WRITER, str(root), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"written\n"
    proc.kill()  # SIGKILL: no cleanup handler in the writer runs
    await proc.wait()
    assert await backend.read("f") == "old text"
    leftovers = temp_files(root)
    assert len(leftovers) == 1  # the killed write really was in flight
    assert (root / leftovers[0]).stat().st_size == 3_000_000
    assert await backend.ls() == ["f"]


async def test_writing_where_a_directory_is_gives_a_backend_error(root: Path) -> None:
    backend = LocalBackend(root)
    await backend.write("dir/inner", "x")
    with pytest.raises(BackendError, match="a directory is there"):
        await backend.write("dir", "y")
    assert await backend.read("dir/inner") == "x"


async def test_writing_below_a_file_gives_a_backend_error(root: Path) -> None:
    backend = LocalBackend(root)
    await backend.write("file", "x")
    with pytest.raises(BackendError, match="a parent of this path is a file"):
        await backend.write("file/child", "y")


async def test_reading_a_directory_is_file_not_found(root: Path) -> None:
    backend = LocalBackend(root)
    await backend.write("dir/inner", "x")
    with pytest.raises(FileNotFoundError, match="'dir' is a directory"):
        await backend.read("dir")
    with pytest.raises(FileNotFoundError, match="dir/inner/deeper"):
        await backend.read("dir/inner/deeper")
    assert await backend.delete("dir") is False


@pytest.mark.parametrize("kind", ["local", "fsspec"])
async def test_a_fifo_under_the_root_is_neither_read_nor_listed(root: Path, kind: str) -> None:
    # Opening a FIFO for reading blocks until a writer comes: a read must refuse it, not hang
    # a worker thread forever.
    backend = LocalBackend(root) if kind == "local" else FsspecBackend(f"file://{root}")
    await backend.write("kept.txt", "x")
    os.mkfifo(root / "pipe")
    with pytest.raises(FileNotFoundError, match="'pipe' is not a regular file"):
        await backend.read("pipe")
    assert await backend.exists("pipe") is False
    assert await backend.ls() == ["kept.txt"]


async def test_a_file_that_is_not_utf8_gives_a_backend_error(root: Path) -> None:
    (root / "binary").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BackendError, match="not UTF-8"):
        await LocalBackend(root).read("binary")


async def test_a_name_longer_than_the_filesystem_allows_gives_advice_not_an_os_error(
    root: Path,
) -> None:
    backend = LocalBackend(root)
    long = "n" * 300
    with pytest.raises(BackendError, match="shorter names"):
        await backend.write(long, "x")
    with pytest.raises(BackendError, match="shorter names"):
        await backend.read(long)
    with pytest.raises(BackendError, match="shorter names"):
        await backend.exists(long)
    assert temp_files(root) == []


async def test_written_files_follow_the_umask_not_temp_file_permissions(root: Path) -> None:
    old = os.umask(0o022)
    try:
        await LocalBackend(root).write("f", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((root / "f").stat().st_mode) == 0o644


async def test_temp_files_of_abandoned_writes_are_never_listed(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / ".plait-0123456789abcdef.tmp").write_text("partial")
    backend = LocalBackend(root)
    await backend.write("sub/real", "x")
    assert await backend.ls() == ["sub/real"]


async def test_a_page_near_the_end_of_a_big_file_is_read_without_loading_it_all(
    root: Path,
) -> None:
    backend = LocalBackend(root)
    size = 10 * 1024 * 1024
    await backend.write("big", "x" * (size - 3) + "end")
    tracemalloc.start()
    try:
        page = await backend.read("big", size - 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert page == "end"
    assert peak < size // 2


async def test_a_path_too_long_or_too_deep_is_refused_before_any_io(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "root")
    for path in ("/".join(["a"] * 5000), "b" * 20_000):
        with pytest.raises(PathEscapeError, match=r"nested deeper|longer than 16384"):
            await backend.write(path, "x")
    assert not (tmp_path / "root").exists()
