"""The file tools' work, as plain functions over a :class:`~plait.workspace.paths.WorkspaceRoot`.

Every read and every listing has a bound (the constants below); each function runs its disk work
in a worker thread, so a slow disk never stalls the event loop. Errors are
:class:`WorkspaceError` (or :class:`~plait.paths.PathEscapeError`) with a message the model can
act on; the tools turn them into error results.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import secrets
import stat
from pathlib import Path
from typing import BinaryIO, Final

from plait.errors import PlaitError
from plait.messages import FilePart, ImagePart
from plait.models.base import InputKind, accepts_input
from plait.parts import MAX_PART_BYTES, MEDIA_SUFFIXES, Blob
from plait.paths import PathEscapeError
from plait.workspace.paths import WorkspaceRoot

__all__ = [
    "MAX_EDIT_BYTES",
    "MAX_LINE_CHARS",
    "MAX_LISTED",
    "MAX_READ_CHARS",
    "MAX_READ_LINES",
    "MAX_WALKED",
    "MAX_WRITE_BYTES",
    "WorkspaceError",
    "edit_file",
    "glob_files",
    "list_folder",
    "read_file",
    "write_file",
]

MAX_READ_LINES: Final = 2000
"""Lines one ``read_file`` shows when the model gives no ``limit``."""
MAX_READ_CHARS: Final = 100_000
"""The most characters one ``read_file`` result holds (a 1 GB file costs this much memory)."""
MAX_LINE_CHARS: Final = 2000
"""A longer line is clipped (marked ``…``) in what ``read_file`` shows."""
MAX_WRITE_BYTES: Final = 10 * 1024 * 1024
"""The largest file ``write_file`` writes."""
MAX_EDIT_BYTES: Final = 10 * 1024 * 1024
"""The largest file ``edit_file`` edits (it reads the file whole)."""
MAX_LISTED: Final = 1000
"""The most entries ``ls`` or ``glob`` returns."""
MAX_WALKED: Final = 100_000
"""The most entries ``glob`` visits before it stops and says so."""

_LINE_BYTES = MAX_LINE_CHARS * 4 + 1  # enough UTF-8 for MAX_LINE_CHARS characters, and one
_SKIPPED_FOLDERS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".mypy_cache"})


class WorkspaceError(PlaitError):
    """A workspace tool could not do what was asked (the message says what to do instead)."""


def _open_regular(root: WorkspaceRoot, target: Path, path: str) -> tuple[int, os.stat_result]:
    """An fd on the regular file ``target`` and its stat: opened without following a link
    and without blocking (a FIFO or device swapped in after the check is refused, never
    waited on)."""
    if target == root.path:
        raise WorkspaceError(f"{path!r} is a folder; ls lists it.")
    try:
        with root.folder_of(target) as (folder, name):
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(name, flags, dir_fd=folder)
    except FileNotFoundError:
        raise WorkspaceError(f"{path!r} does not exist; ls or glob shows what does.") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathEscapeError(path, "it became a symlink after it was checked") from None
        raise
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode):
        return fd, info
    os.close(fd)
    if stat.S_ISDIR(info.st_mode):
        raise WorkspaceError(f"{path!r} is a folder; ls lists it.")
    raise WorkspaceError(f"{path!r} is not a regular file (a FIFO, socket or device).")


def _write_inside(root: WorkspaceRoot, target: Path, path: str, data: bytes) -> bool:
    """Write ``data`` to ``target`` (folders made, no link followed); whether it existed. A
    file with more than one hard link is replaced by a new file instead of written through,
    so a link to a file outside the workspace does not change that file."""
    with root.folder_of(target, make=True) as (folder, name):
        try:
            info: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise PathEscapeError(path, "it became a symlink after it was checked")
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise WorkspaceError(f"{path!r} is a folder; give a file path.")
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise WorkspaceError(f"{path!r} is not a regular file (a FIFO, socket or device).")
        if info is not None and info.st_nlink > 1:
            _replace(folder, name, data, info)
            return True
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o666, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathEscapeError(path, "it became a symlink after it was checked") from None
            if exc.errno == errno.ENXIO:  # a FIFO swapped in, no reader
                raise WorkspaceError(f"{path!r} is not a regular file (a FIFO).") from None
            raise
        with open(fd, "wb") as handle:
            now = os.fstat(fd)
            if not stat.S_ISREG(now.st_mode) or now.st_nlink > 1:
                raise WorkspaceError(f"{path!r} changed while it was written; try again.")
            handle.truncate(0)
            handle.write(data)
        return info is not None


def _replace(folder: int, name: str, data: bytes, info: os.stat_result) -> None:
    """Write ``data`` to a new file next to ``name`` (same mode and, where allowed, owner) and
    rename it over ``name``."""
    temporary = f".{name}.plait-{secrets.token_hex(4)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o600, dir_fd=folder)
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(fd, stat.S_IMODE(info.st_mode))
            with contextlib.suppress(OSError):
                os.fchown(fd, info.st_uid, info.st_gid)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise


async def list_folder(root: WorkspaceRoot, path: str = ".") -> str:
    """The entries of a folder: folders end with ``/``, files show their size."""
    target = root.resolve(path)

    def work() -> str:
        if not target.is_dir():
            raise WorkspaceError(f"{path!r} is not a folder.")
        lines: list[str] = []
        total = 0
        with os.scandir(target) as entries:
            for entry in entries:
                total += 1
                if len(lines) >= MAX_LISTED:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    lines.append(entry.name + "/")
                elif entry.is_symlink():
                    lines.append(f"{entry.name} -> (link)")
                else:
                    lines.append(f"{entry.name}  {entry.stat(follow_symlinks=False).st_size} B")
        lines.sort()
        more = f" (the first {MAX_LISTED} of {total})" if total > MAX_LISTED else ""
        head = f"[{root.relative(target)}: {total} entries{more}]"
        return "\n".join([head, *lines]) if lines else f"{head}\n(empty)"

    return await asyncio.to_thread(work)


async def read_file(
    root: WorkspaceRoot,
    path: str,
    offset: int = 0,
    limit: int | None = None,
    *,
    model: object | None = None,
) -> str | ImagePart | FilePart:
    """Lines ``offset`` (0-based) to ``offset + limit`` (default :data:`MAX_READ_LINES`), each
    numbered, with a header when the file goes on; an image or PDF as a part when ``model``
    takes that kind, else a note."""
    if offset < 0 or (limit is not None and limit < 1):
        raise WorkspaceError("offset must be >= 0 and limit >= 1 (or omitted).")
    target = root.resolve(path)
    media_type = MEDIA_SUFFIXES.get(target.suffix.lower())
    if media_type is not None:
        return await _read_media(root, target, path, media_type, model)
    count = MAX_READ_LINES if limit is None else limit
    return await asyncio.to_thread(_read_lines, root, target, path, offset, count)


async def _read_media(
    root: WorkspaceRoot, target: Path, path: str, media_type: str, model: object | None
) -> str | ImagePart | FilePart:
    kind: InputKind = "document" if media_type == "application/pdf" else "image"
    if model is not None and not accepts_input(model, kind):
        name = getattr(model, "name", "this model")
        return f"[{path}: {media_type} file; {name} does not take {kind}s, so it is not shown]"

    def work() -> bytes:
        fd, info = _open_regular(root, target, path)
        with open(fd, "rb") as handle:
            if info.st_size > MAX_PART_BYTES:
                raise WorkspaceError(
                    f"{path!r} is {info.st_size:,} bytes, over the {MAX_PART_BYTES:,} a part may "
                    "hold."
                )
            return handle.read(MAX_PART_BYTES + 1)

    data = await asyncio.to_thread(work)
    try:
        if kind == "image":
            return ImagePart(Blob(data), media_type)
        return FilePart(Blob(data), media_type, target.name)
    except PlaitError as exc:
        return f"[{path}: {len(data):,} bytes that cannot be shown: {exc}]"


def _skip_line(handle: BinaryIO) -> bool:
    """Read past one line, a MiB at a time (a longer line is still one line); False at the
    end of the file."""
    read = False
    while chunk := handle.readline(1 << 20):
        read = True
        if chunk.endswith(b"\n"):
            break
    return read


def _read_lines(root: WorkspaceRoot, target: Path, path: str, offset: int, count: int) -> str:
    fd, info = _open_regular(root, target, path)
    size = info.st_size
    with open(fd, "rb") as handle:
        if b"\x00" in handle.read(8192):
            return f"[{path}: binary file, {size:,} bytes; not shown]"
        handle.seek(0)
        for _ in range(offset):
            if not _skip_line(handle):
                return f"[{path}: offset {offset} is past the end of the file]"
        shown: list[str] = []
        used = 0
        number = offset
        more = False
        while len(shown) < count:
            raw = handle.readline(_LINE_BYTES)
            if not raw:
                break
            cut = len(raw) == _LINE_BYTES and not raw.endswith(b"\n")
            if cut:  # a longer line: skip its rest, a MiB at a time
                while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if cut or len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + "…"
            number += 1
            entry = f"{number:6}\t{line}\n"
            if used + len(entry) > MAX_READ_CHARS and shown:
                more = True
                break
            shown.append(entry)
            used += len(entry)
        else:
            more = bool(handle.readline(1))
    if not shown:
        return f"[{path}: empty file]" if offset == 0 else f"[{path}: nothing at offset {offset}]"
    tail = f"; more follows: read_file with offset {number}" if more else ""
    return f"[{path}: lines {offset + 1}-{number}{tail}]\n" + "".join(shown)


async def write_file(root: WorkspaceRoot, path: str, content: str) -> str:
    """Write ``content`` to ``path`` (parents made), replacing what was there."""
    data = content.encode("utf-8", "surrogatepass")
    if len(data) > MAX_WRITE_BYTES:
        raise WorkspaceError(
            f"content is {len(data):,} bytes, over the {MAX_WRITE_BYTES:,} write_file writes."
        )
    target = root.resolve(path)

    def work() -> str:
        if target == root.path:
            raise WorkspaceError(f"{path!r} is a folder; give a file path.")
        existed = _write_inside(root, target, path, data)
        verb = "replaced" if existed else "created"
        return f"{verb} {root.relative(target)} ({len(data):,} bytes)"

    return await asyncio.to_thread(work)


async def edit_file(
    root: WorkspaceRoot, path: str, old_string: str, new_string: str, replace_all: bool = False
) -> str:
    """Replace ``old_string`` by ``new_string``: it must occur exactly once, unless
    ``replace_all``."""
    if not old_string:
        raise WorkspaceError("old_string is empty; give the exact text to replace.")
    if old_string == new_string:
        raise WorkspaceError("old_string and new_string are the same; nothing would change.")
    target = root.resolve(path)

    def work() -> str:
        fd, info = _open_regular(root, target, path)
        with open(fd, "rb") as handle:
            if info.st_size > MAX_EDIT_BYTES:
                raise WorkspaceError(
                    f"{path!r} is {info.st_size:,} bytes, over the {MAX_EDIT_BYTES:,} edited."
                )
            text = handle.read(MAX_EDIT_BYTES + 1).decode("utf-8", "surrogateescape")
        found = text.count(old_string)
        if found == 0:
            raise WorkspaceError(
                f"old_string was not found in {path!r}; read_file it and copy the text exactly "
                "(whitespace included)."
            )
        if found > 1 and not replace_all:
            raise WorkspaceError(
                f"old_string occurs {found} times in {path!r}; include more surrounding text to "
                "make it unique, or pass replace_all=true."
            )
        try:
            data = text.replace(old_string, new_string).encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise WorkspaceError(
                "new_string holds a lone surrogate (\\ud800-\\udfff) UTF-8 cannot encode; send "
                "the text itself."
            ) from None
        _write_inside(root, target, path, data)
        return f"edited {root.relative(target)}: {found} replacement{'s' * (found > 1)}"

    return await asyncio.to_thread(work)


class GlobPattern:
    """A glob over POSIX paths relative to the folder searched: ``*``, ``?`` and ``[...]``
    within one name, ``**`` as a whole segment for any folders (``**/`` none or more, a
    trailing ``/**`` one or more names); ``**`` inside a name is ``*``.

    Matched a segment at a time, each by a regex whose stars cannot backtrack into each other
    (a star before more of the segment's pattern takes the earliest place that pattern fits,
    which is never worse), so ``*a*a*a*a*a*a*a*a*b`` costs what ``*b`` costs instead of
    growing with the name's length to the power of its stars."""

    __slots__ = ("parts",)

    def __init__(self, pattern: str) -> None:
        parts: list[re.Pattern[str] | None] = []  # None: a "**" segment
        for segment in pattern.split("/"):
            if segment == "**":
                if not parts or parts[-1] is not None:  # "**/**" is "**"
                    parts.append(None)
                continue
            parts.append(_segment_regex(segment))
        self.parts = tuple(parts)

    def match(self, path: str) -> bool:
        """Whether ``path`` (``a/b/c.py``) matches."""
        names = path.split("/")
        reach = {0}  # how many names the pattern so far can have matched
        for index, part in enumerate(self.parts):
            if not reach:
                return False
            if part is None:
                least = min(reach) + (index == len(self.parts) - 1)  # trailing: one at least
                reach = set(range(least, len(names) + 1))
            else:
                reach = {n + 1 for n in reach if n < len(names) and part.fullmatch(names[n])}
        return len(names) in reach


def _segment_regex(segment: str) -> re.Pattern[str]:
    """One name's pattern as a regex: the fixed runs between stars (literals, ``?``,
    ``[...]``) matched atomically at their earliest place, the last one anchored at the end."""
    chunks: list[list[str]] = [[]]  # the fixed runs, split at each (run of) star
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            while i < len(segment) and segment[i] == "*":
                i += 1
            chunks.append([])
            continue
        if c == "?":
            chunks[-1].append(".")
        elif c == "[" and (end := segment.find("]", i + 1)) > i + 1:
            body = segment[i + 1 : end].replace("\\", "\\\\")
            chunks[-1].append("[^" + body[1:] + "]" if body[0] in "!^" else "[" + body + "]")
            i = end + 1
            continue
        else:
            chunks[-1].append(re.escape(c))
        i += 1
    fixed = ["".join(chunk) for chunk in chunks]
    if len(fixed) == 1:
        return re.compile(fixed[0] + r"\Z", re.DOTALL)
    middle = "".join(f"(?>.*?{run})" for run in fixed[1:-1] if run)
    return re.compile(fixed[0] + middle + ".*" + fixed[-1] + r"\Z", re.DOTALL)


def glob_pattern(pattern: str) -> GlobPattern:
    """``pattern`` as a :class:`GlobPattern`."""
    return GlobPattern(pattern)


async def glob_files(root: WorkspaceRoot, pattern: str, path: str = ".") -> str:
    """Files under ``path`` whose relative path matches ``pattern``, newest first."""
    if not pattern or len(pattern) > 1000 or ".." in pattern.split("/"):
        raise WorkspaceError("give a pattern such as '**/*.py' (no '..', at most 1,000 chars).")
    base = root.resolve(path)
    while pattern.startswith("./"):  # (not lstrip: "./.github/*" keeps its dot)
        pattern = pattern[2:]
    matcher = glob_pattern(pattern)

    def work() -> str:
        found: list[tuple[float, str]] = []
        visited = 0
        stopped = False
        for folder, dirs, files in os.walk(base, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_FOLDERS)
            for name in files:
                visited += 1
                full = os.path.join(folder, name)
                rel = os.path.relpath(full, base).replace(os.sep, "/")
                if matcher.match(rel):
                    try:
                        found.append((os.lstat(full).st_mtime, rel))
                    except OSError:
                        continue
            visited += len(dirs)
            if visited > MAX_WALKED:
                stopped = True
                break
        found.sort(key=lambda item: (-item[0], item[1]))
        shown = [rel for _, rel in found[:MAX_LISTED]]
        notes = []
        if len(found) > MAX_LISTED:
            notes.append(f"the newest {MAX_LISTED} of {len(found)}")
        if stopped:
            notes.append(f"stopped after {MAX_WALKED:,} entries: narrow path")
        note = f" ({'; '.join(notes)})" if notes else ""
        head = f"[{len(found)} files match {pattern!r} in {root.relative(base)}{note}]"
        return "\n".join([head, *shown])

    return await asyncio.to_thread(work)
