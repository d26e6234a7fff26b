"""Asking the person at the terminal before the workspace writes a file or runs a command.

``plait chat`` (and ``plait run`` with a terminal on standard input) pass a
:class:`TerminalApprover` as the workspace's ``approve``: a ``write_file``, ``edit_file`` or
``shell`` call that ``--yes`` or ``[workspace] allow`` does not cover stops the spinner, shows
what the model wants to do and waits for ``y``. Anything else, an empty line (the default) or the
end of input, is no; the model reads that the user declined. Calls made at once are asked one at
a time. Ctrl-C at the question cancels the turn, as anywhere else in it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from plait.cli.console import short

__all__ = ["TerminalApprover", "describe_call", "read_line"]


async def read_line(stream: IO[str]) -> str:
    """One line typed at ``stream`` (``""`` at the end of input), read without blocking the
    event loop. On a terminal it waits on the file descriptor in the loop, so a cancelled turn
    (Ctrl-C) stops waiting and leaves no reader behind to take the next line typed; a stream
    with no descriptor is read in a worker thread."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return await asyncio.to_thread(stream.readline)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        try:
            data = os.read(fd, 4096)  # a terminal in line mode hands over one line
        except OSError:
            data = b""
        if not done.done():
            done.set_result(data)

    loop.add_reader(fd, readable)
    try:
        return (await done).decode("utf-8", "replace")
    finally:
        loop.remove_reader(fd)


def describe_call(tool: str, args: dict[str, Any]) -> str:
    """What a gated call would do, in one line: ``run: ls -la``, ``write: notes.md``."""
    if tool == "shell":
        return f"run: {short(str(args.get('command', '')), 300)}"
    verb = "edit" if tool == "edit_file" else "write"
    return f"{verb}: {short(str(args.get('path', '')), 300)}"


class TerminalApprover:
    """An ``approve`` for :class:`~plait.workspace.Workspace` that asks on ``console`` and reads
    the answer from ``stdin`` (default: standard input). ``before`` runs first (the turn display's
    ``pause``, so no spinner draws over the question)."""

    def __init__(
        self,
        console: Console,
        *,
        before: Callable[[], None] | None = None,
        stdin: IO[str] | None = None,
    ) -> None:
        self.console = console
        self.before = before
        self.stdin = stdin
        self._lock = asyncio.Lock()

    async def __call__(self, tool: str, args: dict[str, Any]) -> bool:
        async with self._lock:
            if self.before is not None:
                self.before()
            self.console.print(
                Text("? the agent wants to ", style="bold yellow")
                + Text(describe_call(tool, args)),
                soft_wrap=True,
            )
            self.console.print(Text("  allow? [y/N] ", style="bold yellow"), end="")
            line = await read_line(self.stdin or sys.stdin)
            if not line:
                self.console.print()
            return line.strip().lower() in ("y", "yes")
