"""``grep``: output of any size and odd inputs end within its deadline."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from plait.workspace.commands import GREP_TIMEOUT, MAX_GREP_BYTES, grep
from plait.workspace.files import WorkspaceError
from plait.workspace.paths import WorkspaceRoot

# A guard for the tests, not a timing assertion: a broken grep hangs instead of failing.
GUARD = GREP_TIMEOUT * 3


async def test_grep_output_over_the_cap_is_cut_not_hung(tmp_path: Path) -> None:
    for i in range(200):
        (tmp_path / f"f{i}.txt").write_text("match line here\n" * 40)
    async with asyncio.timeout(GUARD):
        text = await grep(WorkspaceRoot(tmp_path), "match")
    head, *lines = text.splitlines()
    assert "more matches were cut" in head
    assert 0 < len("\n".join(lines)) <= MAX_GREP_BYTES
    assert all(line.endswith(":match line here") for line in lines)


async def test_grep_output_under_the_cap_comes_whole(tmp_path: Path) -> None:
    # several pipe reads' worth, all under the cap: every line must arrive
    for i in range(10):
        (tmp_path / f"f{i:02}.txt").write_text("".join(f"match {n}\n" for n in range(50)))
    async with asyncio.timeout(GUARD):
        text = await grep(WorkspaceRoot(tmp_path), "match")
    head, *lines = text.splitlines()
    assert len(lines) == 10 * 50 and "cut" not in head


async def test_grep_on_a_fifo_does_not_wait_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    async with asyncio.timeout(GUARD):
        text = await grep(WorkspaceRoot(tmp_path), "x", "pipe")
    assert text.startswith("[no line matches")


async def test_a_pattern_that_takes_gigabytes_fails_with_grep_s_own_message(
    tmp_path: Path,
) -> None:
    (tmp_path / "f.txt").write_text("aaaa\n")
    async with asyncio.timeout(GUARD):
        with pytest.raises(WorkspaceError, match=r"(?i)memory exhausted"):
            await grep(WorkspaceRoot(tmp_path), "x{32767}{32767}")
