"""The file tools' work over a real folder: hostile names, links, FIFOs and patterns."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import stat
import threading
from pathlib import Path

import pytest

from plait.paths import PathEscapeError
from plait.workspace.files import (
    WorkspaceError,
    edit_file,
    glob_files,
    glob_pattern,
    read_file,
    write_file,
)
from plait.workspace.paths import WorkspaceRoot

_AT_FDCWD, _RENAME_EXCHANGE = -100, 2
GUARD = 60.0
"""A guard, not a timing assertion: a tool that waits on a FIFO hangs instead of failing."""


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("**", ["a", "a/b/c"], []),
        ("src/**", ["src/a", "src/a/b"], ["src", "a/src/b"]),
        ("**/t/**/*.py", ["t/a.py", "x/t/y/z/a.py"], ["t.py", "x/a.py"]),
        ("*a*b*c", ["abc", "xaxbxc", "aabbcc"], ["acb", "a/bc"]),
        ("a*b?c*", ["abxc", "aaabbbxcz"], ["abc"]),
        ("*[!a]", ["ab"], ["a/a", "ba"]),
        ("*.tar.gz", ["x.tar.gz"], ["x.tar.gzz", "d/x.tar.gz"]),
    ],
)
def test_glob_patterns_segment_by_segment(pattern: str, yes: list[str], no: list[str]) -> None:
    matcher = glob_pattern(pattern)
    assert [p for p in yes if not matcher.match(p)] == []
    assert [p for p in no if matcher.match(p)] == []


async def test_a_pattern_of_many_stars_does_not_backtrack_forever(tmp_path: Path) -> None:
    # As one backtracking regex this took 37 s at 8 stars over a 60-character name, holding
    # the GIL (the event loop stalled); each star more multiplies it by the name's length.
    (tmp_path / ("a" * 200)).write_text("")
    (tmp_path / ("a" * 20 + "b")).write_text("")
    found = await glob_files(WorkspaceRoot(tmp_path), "*a" * 40 + "*b")
    assert found.splitlines()[1:] == []
    found = await glob_files(WorkspaceRoot(tmp_path), "*a" * 20 + "*b")
    assert found.splitlines()[1:] == ["a" * 20 + "b"]


async def test_a_leading_dot_slash_keeps_a_hidden_folder(tmp_path: Path) -> None:
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "ci.yml").write_text("")
    (tmp_path / "github").mkdir()
    (tmp_path / "github" / "other.yml").write_text("")
    found = await glob_files(WorkspaceRoot(tmp_path), "./.github/*.yml")
    assert found.splitlines()[1:] == [".github/ci.yml"]


@pytest.fixture
def rooted(tmp_path: Path) -> tuple[WorkspaceRoot, Path, Path]:
    """A workspace and a folder beside it holding ``secret.txt``."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    return WorkspaceRoot(ws), ws, outside


async def test_write_and_edit_over_a_hard_link_leave_the_file_outside_alone(
    rooted: tuple[WorkspaceRoot, Path, Path],
) -> None:
    root, ws, outside = rooted
    os.link(outside / "secret.txt", ws / "linked.txt")
    os.chmod(ws / "linked.txt", 0o640)
    assert (await write_file(root, "linked.txt", "new secret")).startswith("replaced")
    assert (outside / "secret.txt").read_text() == "secret"
    assert (ws / "linked.txt").read_text() == "new secret"
    assert stat.S_IMODE((ws / "linked.txt").stat().st_mode) == 0o640
    os.unlink(ws / "linked.txt")
    os.link(outside / "secret.txt", ws / "linked.txt")
    await edit_file(root, "linked.txt", "secret", "edited")
    assert (outside / "secret.txt").read_text() == "secret"
    assert (ws / "linked.txt").read_text() == "edited"
    assert sorted(p.name for p in ws.iterdir()) == ["linked.txt"]  # no temporary left


async def test_a_fifo_is_refused_by_write_read_and_edit_without_waiting(
    rooted: tuple[WorkspaceRoot, Path, Path],
) -> None:
    root, ws, _ = rooted
    os.mkfifo(ws / "pipe")
    async with asyncio.timeout(GUARD):
        for work in (
            write_file(root, "pipe", "x"),
            read_file(root, "pipe"),
            edit_file(root, "pipe", "a", "b"),
        ):
            with pytest.raises(WorkspaceError, match="not a regular file"):
                await work


async def test_a_symlink_loop_is_a_path_error(rooted: tuple[WorkspaceRoot, Path, Path]) -> None:
    root, ws, _ = rooted
    (ws / "one").symlink_to("two")
    (ws / "two").symlink_to("one")
    for work in (read_file(root, "one"), write_file(root, "one/x", "x")):
        with pytest.raises(PathEscapeError, match="loop"):
            await work


def test_a_folder_swapped_for_a_link_after_the_check_is_not_followed(
    rooted: tuple[WorkspaceRoot, Path, Path],
) -> None:
    root, ws, outside = rooted
    (ws / "sub").mkdir()
    target = root.resolve("sub/secret.txt")
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to(outside)
    with pytest.raises(PathEscapeError, match="no longer a folder"), root.folder_of(target):
        pass


async def test_writes_racing_a_folder_swap_never_land_outside(
    rooted: tuple[WorkspaceRoot, Path, Path],
) -> None:
    # What a shell command running beside write_file can do: swap a folder for a link out.
    root, ws, outside = rooted
    (ws / "real").mkdir()
    (ws / "out").symlink_to(outside)
    stop = threading.Event()
    libc = ctypes.CDLL(None, use_errno=True)
    here, there = os.fsencode(ws / "real"), os.fsencode(ws / "out")

    swaps: list[int] = []

    def swap() -> None:  # renameat2(RENAME_EXCHANGE): "real" is always there, dir or link
        while not stop.is_set():
            assert libc.renameat2(_AT_FDCWD, here, _AT_FDCWD, there, _RENAME_EXCHANGE) == 0
            swaps.append(1)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        for _ in range(300):
            with contextlib.suppress(PathEscapeError, WorkspaceError, OSError):
                await write_file(root, "real/secret.txt", "overwritten")
            with contextlib.suppress(PathEscapeError, WorkspaceError, OSError):
                await edit_file(root, "real/secret.txt", "secret", "edited")
    finally:
        stop.set()
        swapper.join()
    assert swaps  # the race ran
    assert (outside / "secret.txt").read_text() == "secret"


async def test_edit_file_keeps_bytes_that_are_not_utf8(
    rooted: tuple[WorkspaceRoot, Path, Path],
) -> None:
    root, ws, _ = rooted
    (ws / "latin.txt").write_bytes(b"caf\xe9 \xff old\r\n")
    await edit_file(root, "latin.txt", "old", "new")
    assert (ws / "latin.txt").read_bytes() == b"caf\xe9 \xff new\r\n"
    with pytest.raises(WorkspaceError, match="surrogate"):
        await edit_file(root, "latin.txt", "new", "\ud800")
    assert (ws / "latin.txt").read_bytes() == b"caf\xe9 \xff new\r\n"


async def test_the_offset_after_a_line_over_a_mib_is_the_next_line(tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_bytes(b"a" * (3 << 20) + b"\nhello\n")
    root = WorkspaceRoot(tmp_path)
    first = await read_file(root, "wide.txt", 0, 1)
    assert "read_file with offset 1" in str(first).splitlines()[0]
    second = await read_file(root, "wide.txt", 1, 1)
    assert str(second).splitlines()[1:] == ["     2\thello"]
