"""``ProjectContext``: the project's own instructions (``AGENTS.md``, ``CLAUDE.md``) in the system
prompt.

At the start of each turn the workspace folder and its parents are searched, nearest last, for
the file names in ``names`` (``AGENTS.md`` then ``CLAUDE.md`` by default, as Codex and Claude
Code read them); what is found is added after the agent's system prompt, each file under a
heading naming its path, in the order outermost folder first, so the nearest instructions come
last. The search stops at the filesystem root, or at ``stop_at`` (default: the first folder
holding ``.git``, the repository's top). A folder every user may write (``/tmp``) is passed
over: its files may be anyone's.

Bounds: each file at most ``max_file_chars`` (default 32,000) characters, all of them at most
``max_chars`` (default 64,000), at most 32 folders up; a file cut short says so in the prompt.
The text is read once per turn, so it is byte-identical between the model calls of a turn (a
provider's prompt cache keeps it); a file changed between turns is read anew. A
:class:`ProjectContextLoaded` event names the files and their sizes (the trace shows it).
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from plait.errors import ConfigurationError
from plait.middleware.base import Middleware, Next
from plait.middleware.context import DispatchContext, TurnContext
from plait.models.base import ModelRequest
from plait.workspace.events import ProjectContextLoaded, ProjectFile

__all__ = ["DEFAULT_NAMES", "ProjectContext", "ProjectContextLoaded", "ProjectFile"]

DEFAULT_NAMES: Final = ("AGENTS.md", "CLAUDE.md")
MAX_FOLDERS_UP: Final = 32


def _anyone_writes(folder: Path) -> bool:
    """Whether every user may create files in ``folder`` (``/tmp``): an ``AGENTS.md`` there
    may be anyone's, so it is not read into the system prompt."""
    try:
        return bool(folder.stat().st_mode & stat.S_IWOTH)
    except OSError:
        return True


def _read_text(path: Path, chars: int) -> str | None:
    """At most ``chars`` characters of ``path`` if it is a regular file (a FIFO or device
    swapped in after the check is not waited on), else None."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, encoding="utf-8", errors="replace") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read(chars)


class ProjectContext(Middleware):
    """Add ``AGENTS.md`` / ``CLAUDE.md`` from ``root`` and its parents to the system prompt."""

    def __init__(
        self,
        root: str | os.PathLike[str] = ".",
        *,
        names: Iterable[str] = DEFAULT_NAMES,
        max_file_chars: int = 32_000,
        max_chars: int = 64_000,
        stop_at: str | os.PathLike[str] | None = None,
    ) -> None:
        self.names = tuple(names)
        if not self.names or any("/" in n or n in ("", ".", "..") for n in self.names):
            raise ConfigurationError("ProjectContext(names=...) takes plain file names.")
        if max_file_chars < 1 or max_chars < 1:
            raise ConfigurationError("ProjectContext bounds must be at least 1 character.")
        self.root = Path(root).expanduser().resolve()
        self.max_file_chars = max_file_chars
        self.max_chars = max_chars
        self.stop_at = None if stop_at is None else Path(stop_at).expanduser().resolve()

    def folders(self) -> list[Path]:
        """The folders searched, nearest first."""
        found: list[Path] = []
        folder = self.root
        for _ in range(MAX_FOLDERS_UP):
            found.append(folder)
            if folder == self.stop_at or (self.stop_at is None and (folder / ".git").exists()):
                break
            if folder.parent == folder:
                break
            folder = folder.parent
        return found

    def load(self) -> tuple[str, list[ProjectFile]]:
        """The text to add and the files it came from (reads the disk)."""
        sections: list[str] = []
        files: list[ProjectFile] = []
        left = self.max_chars
        for folder in reversed(self.folders()):
            for name in self.names:
                path = folder / name
                if left <= 0 or not path.is_file() or _anyone_writes(folder):
                    continue
                budget = min(self.max_file_chars, left)
                try:
                    text = _read_text(path, budget + 1)
                except OSError:
                    continue
                if text is None:
                    continue
                cut = len(text) > budget
                text = text[:budget].strip()
                if not text:
                    continue
                note = f"\n[{name} was cut at {budget:,} characters]" if cut else ""
                sections.append(f"## Project instructions from {path}\n\n{text}{note}")
                files.append(ProjectFile(str(path), len(text), cut))
                left -= len(text)
        return "\n\n".join(sections), files

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        text, files = await asyncio.to_thread(self.load)
        ctx.scratch[self] = text
        ctx.emit(ProjectContextLoaded(files=files, chars=len(text)))
        await next()

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        text = ctx.turn.scratch.get(self)
        if not text:
            return request
        base = request.system_prompt
        return request.replace(system_prompt=f"{base}\n\n{text}" if base else text)
