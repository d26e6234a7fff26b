"""``plait threads resume ID``: decide a paused turn's held calls and let the turn go on.

The agent is built as ``plait run`` builds it (the same flags and config), so the turn continues
with the same model, skills and tools, in this process, from the thread store. Decisions come
from ``--approve-all`` / ``--approve TOOL`` / ``--deny-all`` or, with a person at the terminal,
from the prompt (:mod:`plait.cli.decisions`); with neither, held calls are rejected. A turn that
pauses again is decided again, until it ends.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from plait.cli.agents import build_agent
from plait.cli.console import JsonEventWriter, fail, report_error
from plait.cli.options import ApproveAllOption, ApproveOption, DenyAllOption, Flags, with_flags
from plait.cli.thread_choice import ThreadChoiceError, resolve_thread_id
from plait.errors import PlaitError

__all__ = ["resume"]


@with_flags
def resume(
    thread: Annotated[str, typer.Argument(help="The paused thread's id, or a unique prefix.")],
    flags: Flags = Flags(),  # noqa: B008 (replaced by with_flags; typer never sees it)
    approve_all: ApproveAllOption = False,
    approve: ApproveOption = None,
    deny_all: DenyAllOption = False,
    json_lines: Annotated[bool, typer.Option("--json", help="Print events as JSON lines.")] = False,
) -> None:
    """Resume a paused turn: show each held tool call (tool, arguments, skill) and approve,
    edit or reject it, then let the turn go on."""
    from plait.cli.decisions import DecisionPolicy, person_at, settle_paused_thread
    from plait.cli.display import TurnDisplay, info_console, make_console
    from plait.cli.run import _resolve

    console = make_console()
    info = info_console(console)
    printer: TurnDisplay | JsonEventWriter = (
        JsonEventWriter() if json_lines else TurnDisplay(console, info=info)
    )
    resolved = _resolve(flags, printer, trace=True)
    # A held workspace call was decided here: an approved one runs, not asked about again.
    resolved.options.workspace_approve = "pause"
    policy = DecisionPolicy(approve_all=approve_all, approve=list(approve or []), deny_all=deny_all)
    asker, stdin = person_at(None if json_lines else info)

    async def main() -> None:
        agent, closers = await build_agent(resolved.options)
        try:
            thread_id = await resolve_thread_id(agent.store, thread)
            done = await settle_paused_thread(
                agent, thread_id, printer, policy, console=asker, stdin=stdin
            )
            if done is None:
                fail(f"Thread {thread_id} is not paused; nothing to resume.", 2)
        finally:
            for close in closers:
                await close()

    try:
        asyncio.run(main())
    except ThreadChoiceError as exc:
        fail(str(exc), 2)
    except PlaitError as exc:  # another resume won (ResumeConflict), a provider error, ...
        report_error(str(exc))
        raise typer.Exit(1) from None
