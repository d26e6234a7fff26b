"""Reading skill files within bounds: whole files under a cap, pages of lines streamed.

:func:`read_regular` opens without following a symlink, checks the file is still regular and
under ``max_bytes`` before reading, and never reads more than ``max_bytes + 1`` bytes.

:func:`read_line_page` skips to line ``offset`` by counting newlines in 1 MiB chunks, keeps at
most ``limit`` lines and ``max_chars`` characters, and counts the remaining lines only while
they stay within :data:`COUNT_LINES_UP_TO` bytes (past it the total is unknown). Memory is
bounded by ``max_chars`` plus one chunk, whatever the file's size.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat as stat_module
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from plait.paths import PathEscapeError
from plait.skills.errors import SkillFileTooLarge

__all__ = [
    "COUNT_LINES_UP_TO",
    "LinePage",
    "LineReader",
    "file_kind",
    "read_line_page",
    "read_regular",
]

COUNT_LINES_UP_TO = 64 * 1024 * 1024
"""Bytes scanned to count a file's lines; a larger file's total is reported as unknown."""

_CHUNK = 1024 * 1024
_SNIFF = 8192
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


@dataclass(frozen=True, slots=True)
class LinePage:
    """Lines ``offset`` to ``offset + len(lines)`` (0-based) of a file.

    ``total`` is the file's line count (``None`` when not counted: the file is too large);
    ``cut`` is True when ``max_chars`` stopped the page before ``limit``; ``binary`` is True
    (and ``lines`` empty) for a file whose first bytes hold a NUL or are not UTF-8. The first
    line starts at character ``start`` of line ``offset``; ``line_cut`` is True when that one
    line alone is longer than ``max_chars``: ``lines`` then holds its first characters only and
    the rest is read from ``start + len(lines[0])``.
    """

    lines: tuple[str, ...]
    offset: int
    total: int | None
    size: int
    cut: bool = False
    binary: bool = False
    start: int = 0
    line_cut: bool = False

    @property
    def end(self) -> int:
        return self.offset + len(self.lines)


@runtime_checkable
class LineReader(Protocol):
    """A source that can serve a page of a file's lines without loading the file."""

    async def read_lines(
        self, ref: str, path: str, offset: int, limit: int | None, max_chars: int, start: int = 0
    ) -> LinePage: ...


def read_line_page(
    target: Path, offset: int, limit: int | None, max_chars: int, start: int = 0
) -> LinePage:
    """The page of ``target`` (see the module docstring), its first line from character
    ``start`` on (a ``start`` past that line's end gives the empty rest of it); ``target`` must
    be a regular file (a symlink or FIFO swapped in raises :class:`OSError`)."""
    fd = os.open(target, _FLAGS)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat_module.S_ISREG(info.st_mode):
            raise OSError(f"{target} is not a regular file")
        head = handle.read(_SNIFF)
        if b"\x00" in head or not _utf8_prefix(head):
            return LinePage((), offset, None, info.st_size, binary=True)
        handle.seek(0)
        skipped = _skip_lines(handle, offset)
        if skipped < offset:
            return LinePage((), offset, skipped, info.st_size)
        _skip_chars(handle, start)
        lines, cut, whole = _take(handle, limit, max_chars)
        line_cut = cut and whole == 0 and bool(lines)
        total = _count_rest(handle, offset + whole, info.st_size)
        return LinePage(
            tuple(lines), offset, total, info.st_size, cut=cut, start=start, line_cut=line_cut
        )


def _skip_chars(handle: BinaryIO, count: int) -> None:
    """Advance past ``count`` characters of the current line, stopping at its newline."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    left = count
    while left > 0:
        raw = handle.read(min(left, _CHUNK))  # a character is at least one byte: no overshoot
        if not raw:
            return
        carried = len(decoder.getstate()[0])  # bytes of a character the last chunk began
        text = decoder.decode(raw)
        newline = text.find("\n")
        if newline >= 0:  # ``text`` starts ``carried`` bytes before ``raw`` does
            used = len(text[:newline].encode("utf-8", "surrogateescape"))
            handle.seek(handle.tell() - len(raw) - carried + used)
            return
        left -= len(text)
    handle.seek(handle.tell() - len(decoder.getstate()[0]))


def _utf8_prefix(data: bytes) -> bool:
    """True when ``data`` is UTF-8, allowing a character cut at its end."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start >= len(data) - 3 and err.reason == "unexpected end of data"
    return True


def _skip_lines(handle: BinaryIO, count: int) -> int:
    """Advance past ``count`` newlines; return how many were passed (fewer at end of file)."""
    passed = 0
    while passed < count:
        position = handle.tell()
        chunk = handle.read(_CHUNK)
        if not chunk:
            return passed
        found = chunk.count(b"\n")
        if passed + found < count:
            passed += found
            continue
        index = -1
        for _ in range(count - passed):
            index = chunk.index(b"\n", index + 1)
        handle.seek(position + index + 1)
        return count
    return passed


def _take(handle: BinaryIO, limit: int | None, max_chars: int) -> tuple[list[str], bool, int]:
    """The lines that fit, whether ``max_chars`` cut the page, and how many whole lines were
    consumed (the handle is left at the start of the first line not consumed)."""
    lines: list[str] = []
    used = 0
    while limit is None or len(lines) < limit:
        start = handle.tell()
        asked = max_chars - used + 1
        raw = handle.readline(asked)
        if not raw:
            return lines, False, len(lines)
        unfinished = len(raw) == asked and not raw.endswith(b"\n") and handle.read(1) != b""
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(raw)
        if used + len(text) > max_chars or unfinished:
            whole = len(lines)
            if not lines:
                lines.append(text[:max_chars])  # the caller pages the rest by character
            handle.seek(start)
            return lines, True, whole
        lines.append(text)
        used += len(text)
    return lines, False, len(lines)


def _count_rest(handle: BinaryIO, lines_so_far: int, size: int) -> int | None:
    if size > COUNT_LINES_UP_TO:
        return None
    total = lines_so_far
    last = b"\n"
    while chunk := handle.read(_CHUNK):
        total += chunk.count(b"\n")
        last = chunk[-1:]
    if last != b"\n":
        total += 1  # a last line without a newline
    return total


_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def read_regular(target: str | os.PathLike[str], path: str, max_bytes: int) -> bytes:
    """Read ``target`` (a path :func:`confine` resolved) without following a symlink put in
    its place since, only if it is still a regular file (a FIFO swapped in would block), and
    only up to ``max_bytes`` (:class:`SkillFileTooLarge` above it, checked before reading).

    The read asks for the size ``fstat`` reported plus one byte, so a typical SKILL.md costs
    one buffer of its own size (not ``max_bytes``); a file that grew since is read on in
    chunks, never past ``max_bytes + 1`` bytes in all (then :class:`SkillFileTooLarge` with
    ``size=None``: how large it grew is not known)."""
    try:
        fd = os.open(target, _OPEN_FLAGS)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise PathEscapeError(path, "it became a symlink while it was being read") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            raise PathEscapeError(path, "it is no longer a regular file")
        if info.st_size > max_bytes:
            raise SkillFileTooLarge(path, info.st_size, max_bytes)
        chunks: list[bytes] = []
        left = max_bytes + 1
        want = info.st_size + 1
        while left > 0 and (chunk := os.read(fd, min(want, left))):
            chunks.append(chunk)
            left -= len(chunk)
            want = _CHUNK
        data = b"".join(chunks)
        if len(data) > max_bytes:  # grew since the fstat: read to the cap, size unknown
            raise SkillFileTooLarge(path, None, max_bytes)
        return data
    finally:
        os.close(fd)


def file_kind(mode: int) -> str | None:
    """What a non-regular, non-folder file is, for messages; ``None`` for regular files."""
    if stat_module.S_ISREG(mode) or stat_module.S_ISDIR(mode):
        return None
    if stat_module.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat_module.S_ISSOCK(mode):
        return "socket"
    if stat_module.S_ISCHR(mode) or stat_module.S_ISBLK(mode):
        return "device"
    return "special file"
