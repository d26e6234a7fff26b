"""Asking the person at the terminal before the workspace writes a file or runs a command.

``plait chat`` (and ``plait run`` with a terminal on standard input) pass a
:class:`TerminalApprover` as the workspace's ``approve``: a ``write_file``, ``edit_file`` or
``shell`` call that ``--yes`` or ``[workspace] allow`` does not cover stops the spinner, shows
what the model wants to do and waits for ``y``. Anything else, an empty line (the default) or the
end of input, is no; the model reads that the user declined. Calls made at once are asked one at
a time.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from plait.cli.console import short

__all__ = ["TerminalApprover", "describe_call"]


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
            stream = self.stdin or sys.stdin
            line = await asyncio.to_thread(stream.readline)
            if not line:
                self.console.print()
            return line.strip().lower() in ("y", "yes")
