"""``plait chat``: an interactive session, one turn per line typed.

It shares ``plait run``'s flags and agent (:mod:`plait.cli.run`); on a terminal, a workspace
write or shell command that ``--yes`` or ``[workspace] allow`` does not cover is asked about at
the prompt (:mod:`plait.cli.approval`). ``--attach`` files go with the first message.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from plait.cli.console import fail, report_error
from plait.cli.inputs import user_message
from plait.cli.options import Flags, Resolved, with_flags
from plait.cli.run import (
    AttachOption,
    ContinueOption,
    McpOption,
    NoThinkingOption,
    ThreadOption,
    VerboseOption,
    _close,
    _error_message,
    _open,
    _print_order,
    _resolve,
    _thread_choice,
    _thread_line,
    _trace_line,
    _turn,
    attachments,
)
from plait.cli.thread_choice import ThreadChoiceError
from plait.cli.ui import NoTraceOption
from plait.errors import ConfigurationError, PlaitError
from plait.messages import Part, new_id

if TYPE_CHECKING:
    from plait.cli.display import TurnDisplay
    from plait.runtime.agent import Agent

__all__ = ["chat"]


@with_flags
def chat(
    flags: Flags,
    attach: AttachOption = None,
    thread: ThreadOption = None,
    continue_: ContinueOption = False,
    mcp: McpOption = None,
    verbose: VerboseOption = False,
    no_thinking: NoThinkingOption = False,
    no_trace: NoTraceOption = False,
) -> None:
    """An interactive session. Ctrl-C cancels the running turn; Ctrl-D or /exit ends the session.

    Workspace writes and shell commands are asked about at the prompt (y/N) unless --yes or
    allow under \\[workspace] in plait.toml allows them.
    """
    from plait.cli.display import TurnDisplay, info_console, make_console

    console = make_console()
    info = info_console(console)
    try:
        parts = attachments(attach or [])
    except ConfigurationError as exc:
        fail(str(exc), 2)
    _thread_choice(thread, continue_)
    display = TurnDisplay(console, verbose=verbose, info=info, thinking=not no_thinking)
    resolved = _resolve(flags, display, mcp, trace=not no_trace)
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    with asyncio.Runner() as runner:
        try:
            agent, closers, found = runner.run(_open(resolved.options, thread, continue_))
        except PlaitError as exc:
            expected = isinstance(exc, ThreadChoiceError)
            fail(str(exc), 2 if expected else 1)
        thread_id = found or new_id()
        _thread_line(info, f"plait chat — thread {thread_id}. Ctrl-D or /exit to leave.")
        if verbose:
            _print_order(info, agent)
        try:
            _chat_loop(runner, agent, thread_id, display, info, resolved, parts, found is None)
        finally:
            runner.run(_close(agent, closers))
    _thread_line(info, f"thread: {thread_id}")


def _chat_loop(
    runner: asyncio.Runner,
    agent: Agent,
    thread_id: str,
    display: TurnDisplay,
    console: Console,
    resolved: Resolved,
    parts: list[Part],
    new_thread: bool = False,
) -> None:
    while True:
        try:
            text = input("you> ").strip()
        except EOFError:
            console.print()
            return
        except KeyboardInterrupt:
            console.print()
            continue
        if text in ("/exit", "/quit"):
            return
        if not text:
            continue
        message = user_message(text, parts)
        parts = []  # attachments go with the first message only
        try:
            runner.run(_turn(agent, message, thread_id, display, resolved.spec, new_thread))
            _trace_line(console, resolved.options)
        except KeyboardInterrupt:
            console.print(Text("(turn cancelled; what was already saved is kept)", style="yellow"))
        except PlaitError as exc:
            report_error(_error_message(exc))
