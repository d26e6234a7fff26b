"""``read_evicted_result``: the one tool that pages back what context strategies moved out of
the window.

Result eviction and overflow recovery write oversized tool results under ``large_tool_results``;
summarization writes the messages each pass folds under ``conversation_history``; both in one
folder per thread (:func:`~plait.context.offload.thread_prefix`). The read tool reads any file
under a root it was given, **in the calling thread's folder only**: a path in another thread's
folder, outside the roots, or escaping with ``..`` is refused with
:class:`EvictedResultUnavailable`. Given a folder instead of a file (the summary names its
history folder), it lists the files there, if the backend can list.

Every middleware that offloads through one backend shares one tool object
(:func:`shared_reader`): the turn's registry accepts the same object twice, so result eviction
and summarization together give the model a single ``read_evicted_result`` that reads both.
The page size belongs to the root, not to the tool: a file is paged (when the model gives no
``limit``) in the page size of the middleware that allowed its root (result eviction: its
``page_chars``, ``max_tokens`` worth by default; summarization: its ``page_chars``, 4000 by
default), whichever middleware was built first; a root allowed twice with different sizes uses
the larger. A ``limit`` is capped at four of that root's pages.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Final, Protocol, runtime_checkable

from plait.context.offload import READ_TOOL_NAME, thread_prefix
from plait.context.part_eviction import MAX_PART_FILE_CHARS, PART_SUFFIX, load_part
from plait.errors import PlaitError, quoted
from plait.messages import FilePart, ImagePart
from plait.paths import normalize_virtual_path
from plait.tools import FunctionTool, Tool, ToolContext

__all__ = ["MAX_LISTED_FILES", "ContextReader", "EvictedResultUnavailable", "shared_reader"]

MAX_LISTED_FILES: Final = 200
"""The most file names one folder listing returns (the newest ones when there are more)."""


class EvictedResultUnavailable(PlaitError):
    """``read_evicted_result`` was asked for a path it may not or cannot read."""


@runtime_checkable
class PageReader(Protocol):
    """What the read tool needs from a backend."""

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str: ...


@runtime_checkable
class _Lister(Protocol):
    async def ls(self, prefix: str = "") -> list[str]: ...


class ContextReader:
    """The ``read_evicted_result`` tool over one backend; :meth:`allow` adds a root.

    ``page_chars`` is the page of roots allowed without one of their own; a page is never
    longer than four of its root's pages.
    """

    def __init__(self, backend: PageReader, page_chars: int) -> None:
        # Weak when possible: the shared cache maps the backend to this reader, and a strong
        # reference back would keep both alive forever. The middleware holding the tool holds
        # the backend, so it lives as long as the tool is in use.
        try:
            ref: Callable[[], PageReader | None] = weakref.ref(backend)
        except TypeError:
            ref = lambda: backend  # noqa: E731
        self._backend = ref
        self.page_chars = max(1, page_chars)
        self._roots: dict[tuple[str, str | None], int] = {}
        self.tool: Tool = self._build_tool()

    @property
    def backend(self) -> PageReader:
        backend = self._backend()
        if backend is None:
            raise EvictedResultUnavailable(
                "The backend holding evicted results is gone; nothing can be read back."
            )
        return backend

    def allow(self, root: str, thread_id: str | None = None, page_chars: int | None = None) -> None:
        """Let the tool read ``root``'s folder of the calling thread, or of ``thread_id`` when
        given (a summarization middleware that files history under a fixed thread id), in pages
        of ``page_chars`` (default: the reader's); allowed again, the larger page wins."""
        key = (normalize_virtual_path(root), thread_id)
        page = max(1, page_chars or self.page_chars)
        self._roots[key] = max(page, self._roots.get(key, 0))

    def folders(self, thread_id: str) -> list[str]:
        """The folders the tool may read for a call made in ``thread_id``."""
        return [thread_prefix(root, fixed or thread_id) for root, fixed in self._roots]

    def _page(self, thread_id: str, key: str) -> int | None:
        """The page size of the root ``key`` lies in (the largest, should roots nest), or
        ``None`` when it lies in none."""
        pages = [
            page
            for (root, fixed), page in self._roots.items()
            if key.startswith(thread_prefix(root, fixed or thread_id) + "/")
        ]
        return max(pages) if pages else None

    def _root_page(self, thread_id: str, path: str, key: str) -> int:
        root_page = self._page(thread_id, key)
        if root_page is None:
            raise EvictedResultUnavailable(
                f"{quoted(path)} is not an evicted result or saved history of this "
                "conversation; pass a full_result_path, or a path the summary names, exactly "
                "as given."
            )
        return root_page

    async def read_page(self, thread_id: str, path: str, offset: int, limit: int | None) -> str:
        """What the tool answers for text: a page with a header naming the next offset, or a
        listing."""
        key = normalize_virtual_path(path)
        if key in self.folders(thread_id):
            return await self._listing(key)
        root_page = self._root_page(thread_id, path, key)
        page = root_page if limit is None else limit
        if offset < 0 or page < 1:
            raise EvictedResultUnavailable("offset must be >= 0 and limit >= 1.")
        page = min(page, root_page * 4)
        try:
            chunk = await self.backend.read(key, offset, page + 1)
        except FileNotFoundError:
            raise EvictedResultUnavailable(
                f"Nothing is saved at {quoted(key)}: it was deleted by the retention policy or "
                "never written. Call the original tool again if you still need it."
            ) from None
        more, chunk = len(chunk) > page, chunk[:page]
        if not chunk and offset > 0:
            return f"[{key}: offset {offset} is past the end]"
        end = offset + len(chunk)
        tail = f"more follows; next offset {end}" if more else "end of result"
        return f"[{key}: characters {offset}-{end}; {tail}]\n{chunk}"

    async def read_part(self, thread_id: str, path: str) -> ImagePart | FilePart:
        """The image or file an evicted part's file (``….part.json``) holds, whole."""
        key = normalize_virtual_path(path)
        self._root_page(thread_id, path, key)
        try:
            text = await self.backend.read(key, 0, MAX_PART_FILE_CHARS)
        except FileNotFoundError:
            raise EvictedResultUnavailable(
                f"Nothing is saved at {quoted(key)}: it was deleted by the retention policy or "
                "never written. Call the original tool again if you still need it."
            ) from None
        try:
            return load_part(text, key)
        except ValueError as exc:
            raise EvictedResultUnavailable(str(exc)) from None

    async def _listing(self, folder: str) -> str:
        backend = self.backend
        if not isinstance(backend, _Lister):
            raise EvictedResultUnavailable(
                f"{folder} is a folder and this backend cannot list it; read a file by the path "
                "given in the summary or in full_result_path."
            )
        names: Sequence[str] = await backend.ls(folder)
        shown = names[-MAX_LISTED_FILES:]
        more = f" (the newest {len(shown)} of {len(names)})" if len(shown) < len(names) else ""
        lines = "\n".join(shown) if shown else "(empty)"
        return f"[{folder}: {len(names)} files{more}; read one by its path]\n{lines}"

    def _build_tool(self) -> Tool:
        async def read_evicted_result(
            path: str, offset: int = 0, limit: int | None = None, *, ctx: ToolContext
        ) -> str | ImagePart | FilePart:
            """Read part of something moved out of your context: a tool result that was too
            large (its full_result_path) or earlier conversation folded into the summary (a
            path or folder the summary names; a folder lists its files). offset and limit count
            characters; each page starts with a header giving the next offset. Read only the
            parts you need. An evicted image or file is shown whole."""
            if normalize_virtual_path(path).endswith(PART_SUFFIX):  # as the file is named
                return await self.read_part(ctx.turn.thread_id, path)
            return await self.read_page(ctx.turn.thread_id, path, offset, limit)

        return FunctionTool(read_evicted_result, name=READ_TOOL_NAME)


_SHARED: weakref.WeakKeyDictionary[object, ContextReader] = weakref.WeakKeyDictionary()


def shared_reader(backend: PageReader, page_chars: int) -> ContextReader:
    """The :class:`ContextReader` of ``backend``, created on first use with ``page_chars`` (the
    page of roots later allowed without their own); every later caller with the same backend
    object gets the same reader (and tool). A backend that cannot be weakly referenced gets a
    reader of its own."""
    try:
        reader = _SHARED.get(backend)
    except TypeError:
        return ContextReader(backend, page_chars)
    if reader is None:
        reader = ContextReader(backend, page_chars)
        _SHARED[backend] = reader
    return reader
