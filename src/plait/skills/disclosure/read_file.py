"""``read_file``: how the model reads a SKILL.md and the files next to it.

=====================================  =======================================================
call                                   result
=====================================  =======================================================
``read_file(path)``, file fits         the whole file, verbatim (frontmatter included): no
(``max_chars``, 400,000 by default)    line limit, so a 5,000-line SKILL.md arrives whole
``read_file(path)``, file is larger    a header ``[path: lines 1-k of n; next offset k]`` and
                                       the first lines that fit: the cut is always announced
``read_file(path, offset, limit)``     lines ``offset`` (0-based) to ``offset + limit``, with
                                       the same header (``end of file`` on the last page)
one line longer than ``max_chars``     its first ``max_chars`` characters and a header
                                       ``next: offset N, start C``: ``read_file(path, N,
                                       start=C)`` continues the line from character ``C``, so
                                       every character is reachable
a skill folder                         the files in it
an image (.png .jpg .gif .webp) or a    the image or PDF as a part, when the calling model
``.pdf``                               takes that kind; otherwise a note saying it cannot
a binary file                          a one-line note with its size
=====================================  =======================================================

A :class:`~plait.skills.sources.FilesystemSource` serves pages streamed from disk
(:mod:`plait.skills.sources.reading`): ``read_file(path, limit=1)`` on a 1 GiB file reads one line,
and a file of any size costs at most ``max_chars`` of memory. Other sources read the file whole,
within their own size cap. A FIFO or device is refused with a message saying so.

Paths are the ones the skills list shows: a SKILL.md location, or a path inside a skill folder.
Reads are confined: a ``..`` segment or a NUL byte is refused outright, a path outside every
skill folder of the thread is refused, and the file itself is read through the skill's source,
which refuses symlinks that resolve outside the skill folder
(:class:`~plait.paths.PathEscapeError`). Errors reach the model as tool errors it can act on.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from plait.errors import ContentError, quoted
from plait.messages import Blob, FilePart, ImagePart
from plait.models.base import InputKind, accepts_input
from plait.parts import MEDIA_SUFFIXES
from plait.paths import PathEscapeError
from plait.skills.catalog import SkillCatalog
from plait.skills.disclosure.scan import READ_TOOL_NAME
from plait.skills.disclosure.snapshot import SkillSnapshot, normalize_location
from plait.skills.errors import SkillError
from plait.skills.model import SkillEntry
from plait.skills.sources.reading import LinePage, LineReader
from plait.tools import FunctionTool, ToolContext

__all__ = [
    "DEFAULT_READ_MAX_CHARS",
    "SkillPathError",
    "build_read_tool",
    "media_type_of",
    "read_skill_file",
    "read_skill_media",
]

DEFAULT_READ_MAX_CHARS = 400_000
"""The most characters one ``read_file`` result holds (about 100,000 tokens)."""

SnapshotLookup = Callable[[ToolContext], SkillSnapshot]


class SkillPathError(SkillError, LookupError):
    """A ``read_file`` path is not inside any skill folder of the thread."""

    def __init__(self, path: str, example: str | None) -> None:
        self.path = path
        hint = f" such as {example!r}" if example else ""
        super().__init__(
            f"{quoted(path)} is not inside a skill folder. read_file reads only SKILL.md files and "
            f"the files in their folders; use a path from the skills list{hint}."
        )


def _locate(snapshot: SkillSnapshot, path: str) -> tuple[SkillEntry, str]:
    """The skill whose folder holds ``path`` (the innermost one) and the path inside it."""
    # Checked on the text normalize_location keeps: "<folder>/.. " must not pass as ".. ".
    stripped = path.strip()
    if "\x00" in stripped:
        raise PathEscapeError(path, "it contains a NUL byte")
    if ".." in stripped.replace("\\", "/").split("/"):
        raise PathEscapeError(path, "it contains a '..' segment")
    location = normalize_location(stripped)
    folder = location
    while True:
        entry = snapshot.folders.get(folder)
        if entry is not None:
            return entry, location[len(folder) :].lstrip("/")
        if folder == "/":
            example = snapshot.entries[0].location if snapshot.entries else None
            raise SkillPathError(path, example)
        folder = posixpath.dirname(folder)


async def read_skill_file(
    catalog: SkillCatalog,
    snapshot: SkillSnapshot,
    path: str,
    offset: int = 0,
    limit: int | None = None,
    *,
    max_chars: int = DEFAULT_READ_MAX_CHARS,
    start: int = 0,
) -> str:
    """What ``read_file`` returns for these arguments (see the module docstring); ``start``
    skips that many characters of line ``offset`` (to page through one very long line)."""
    if offset < 0 or start < 0 or (limit is not None and limit < 1):
        raise ValueError(
            "offset must be >= 0, start >= 0 and limit >= 1 (or omitted for the whole file)."
        )
    entry, inner = _locate(snapshot, path)
    source = catalog.source(entry.source_id)
    if not inner:
        files = ["SKILL.md", *await source.list(entry.id)]
        return f"[{path}: folder of skill {entry.name!r}]\n" + "\n".join(files)
    if isinstance(source, LineReader):
        page = await source.read_lines(entry.id, inner, offset, limit, max_chars, start)
        return _render_page(page, path, offset, limit)
    data = await source.read(entry.id, inner)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"[{path}: binary file, {len(data)} bytes; not shown]"
    if offset == 0 and start == 0 and limit is None and len(text) <= max_chars:
        return text
    return _page(text, path, offset, limit, max_chars, start)


def _render_page(page: LinePage, path: str, offset: int, limit: int | None) -> str:
    """What ``read_file`` shows for a page streamed from disk (same shapes as :func:`_page`)."""
    if page.binary:
        return f"[{path}: binary file, {page.size} bytes; not shown]"
    whole = offset == page.start == 0 and limit is None and not page.cut
    if whole and page.total == page.end:
        return "".join(page.lines)
    total = "?" if page.total is None else str(page.total)
    if page.total == 0:
        return f"[{path}: empty file]"
    if not page.lines:
        return f"[{path}: offset {offset} is past the end of the file ({total} lines)]"
    if page.line_cut:
        return _line_cut(path, offset, page.start, page.lines[0], total)
    at_end = page.total is not None and page.end >= page.total
    tail = "end of file" if at_end else f"next offset {page.end}"
    cut = " (the file is larger than one read)" if page.cut else ""
    header = f"[{path}: lines {offset + 1}-{page.end} of {total}{_from(page.start)}; {tail}{cut}]\n"
    return header + "".join(page.lines)


def _from(start: int) -> str:
    """The header's note that the first line starts at character ``start``."""
    return f", the first from character {start + 1}" if start else ""


def _line_cut(path: str, offset: int, start: int, shown: str, total: str) -> str:
    """One piece of a line longer than a read, with where the next piece starts."""
    end = start + len(shown)
    header = (
        f"[{path}: line {offset + 1} of {total}, characters {start + 1}-{end} (the line is longer "
        f"than one read); next offset {offset}, start {end}]\n"
    )
    return header + shown + "\n"


def _page(
    text: str, path: str, offset: int, limit: int | None, max_chars: int, start: int = 0
) -> str:
    lines = text.splitlines(keepends=True)
    total = len(lines)
    if not total:
        return f"[{path}: empty file]"
    if offset >= total:
        return f"[{path}: offset {offset} is past the end of the file ({total} lines)]"
    lines[offset] = lines[offset][start:]
    stop = total if limit is None else min(total, offset + limit)
    chosen: list[str] = []
    used = 0
    for line in lines[offset:stop]:
        if used + len(line) > max_chars:
            if not chosen:
                return _line_cut(path, offset, start, line[:max_chars], str(total))
            break
        chosen.append(line)
        used += len(line)
    end = offset + len(chosen)
    tail = "end of file" if end >= total else f"next offset {end}"
    cut = " (the file is larger than one read)" if end < stop else ""
    header = f"[{path}: lines {offset + 1}-{end} of {total}{_from(start)}; {tail}{cut}]\n"
    return header + "".join(chosen)


def media_type_of(path: str) -> str | None:
    """The image or PDF media type ``path``'s suffix names, or ``None`` for any other file."""
    return MEDIA_SUFFIXES.get(posixpath.splitext(path)[1].lower())


async def read_skill_media(
    catalog: SkillCatalog, snapshot: SkillSnapshot, path: str, model: object
) -> str | ImagePart | FilePart:
    """An image or PDF in a skill folder as a part, when ``model`` takes that kind
    (:func:`~plait.models.base.accepts_input`); otherwise, or when the bytes are not what the
    suffix says, a note saying why it cannot be shown. Confined like :func:`read_skill_file`."""
    entry, inner = _locate(snapshot, path)
    media_type = media_type_of(inner) or "application/octet-stream"
    kind: InputKind = "document" if media_type == "application/pdf" else "image"
    if not accepts_input(model, kind):
        return (
            f"[{path}: {media_type} file; this model ({getattr(model, 'name', 'unknown')}) does "
            f"not take {kind}s, so it cannot be shown]"
        )
    data = await catalog.source(entry.source_id).read(entry.id, inner)
    try:
        if kind == "image":
            return ImagePart(Blob(data), media_type)
        return FilePart(Blob(data), media_type, posixpath.basename(inner))
    except ContentError as exc:
        return f"[{path}: {len(data):,} bytes that cannot be shown: {exc}]"


def build_read_tool(
    catalog: SkillCatalog, snapshot_of: SnapshotLookup, *, max_chars: int
) -> FunctionTool:
    """The ``read_file`` tool over ``catalog``; ``snapshot_of`` gives the calling thread's
    skills."""

    async def read_file(
        path: str,
        offset: int = 0,
        limit: int | None = None,
        start: int = 0,
        *,
        ctx: ToolContext,
    ) -> str | ImagePart | FilePart:
        """Read a skill's SKILL.md (the path shown in the skills list) or a file in a skill's
        folder. Returns the whole file. Only for very large files, pass offset (first line,
        0-based) and limit (number of lines) to read it in pages; a paged result starts with a
        header giving the next offset (and a start, the character to continue a very long line
        from). An image or PDF is shown as itself."""
        snapshot = snapshot_of(ctx)
        if media_type_of(path) is not None:
            return await read_skill_media(catalog, snapshot, path, ctx.turn.model)
        return await read_skill_file(
            catalog, snapshot, path, offset, limit, max_chars=max_chars, start=start
        )

    return FunctionTool(read_file, name=READ_TOOL_NAME)
