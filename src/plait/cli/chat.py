"""``plait chat``: an interactive session, one turn per message typed.

It shares ``plait run``'s flags and agent (:mod:`plait.cli.run`); on a terminal, a workspace
write or shell command that ``--yes`` or ``[workspace] allow`` does not cover is asked about at
the prompt (:mod:`plait.cli.approval`). A turn that pauses on held calls is decided inline
(:mod:`plait.cli.decisions`: ``--approve-all`` / ``--approve TOOL`` / ``--deny-all``, else
approve / edit / reject at the terminal, else rejected) and resumed. ``--attach`` files go with
the first message.

A line starting with ``/`` is a command (:mod:`plait.cli.slash`: ``/help``, ``/model``,
``/clear``, ``/thread``, ``/skills``, ``/pin``, ``/usage``, ``/exit``). On a terminal the prompt is
prompt_toolkit's, so a multi-line paste is one message (:mod:`plait.cli.chat_host`); a pipe is
read a line per message. A continued thread (``-c``, ``--thread``, ``--resume``) is recapped
before the first prompt (:mod:`plait.cli.chat_threads`).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from plait.cli.agents import Mode
from plait.cli.chat_host import AgentHost, LineReader, Reader, reader_for
from plait.cli.chat_threads import RESUME_LIMIT, pick, recap_lines, resume_lines
from plait.cli.console import fail, report_error
from plait.cli.inputs import user_message
from plait.cli.options import (
    ApproveAllOption,
    ApproveOption,
    DenyAllOption,
    Flags,
    RequireApprovalOption,
    Resolved,
    with_flags,
)
from plait.cli.run import (
    FLAGS,
    THREAD_INFO_KEY,
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
    attachments,
)
from plait.cli.slash import ChatSession, Slash, read_line, run_slash
from plait.cli.thread_choice import ThreadChoiceError, resolve_thread_id, started_in
from plait.cli.ui import NoTraceOption
from plait.errors import ConfigurationError, PlaitError
from plait.messages import Part, UserMessage, new_id

if TYPE_CHECKING:
    from plait.cli.decisions import DecisionPolicy
    from plait.cli.display import TurnDisplay
    from plait.middleware.context import Event
    from plait.runtime.agent import Agent

__all__ = ["chat"]


ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Pick a recent thread to continue from a numbered list; --resume ID continues the "
        "thread ID (a unique prefix) at once.",
    ),
]
ResumeIdArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="ID", help="With --resume: the thread to continue (a unique prefix of its id)."
    ),
]


@with_flags
def chat(
    resume_id: ResumeIdArgument = None,
    flags: Flags = FLAGS,
    attach: AttachOption = None,
    thread: ThreadOption = None,
    continue_: ContinueOption = False,
    resume: ResumeOption = False,
    mcp: McpOption = None,
    verbose: VerboseOption = False,
    no_thinking: NoThinkingOption = False,
    no_trace: NoTraceOption = False,
    approve_all: ApproveAllOption = False,
    approve: ApproveOption = None,
    deny_all: DenyAllOption = False,
    require_approval: RequireApprovalOption = None,
) -> None:
    """An interactive session. Ctrl-C cancels the running turn; Ctrl-D or /exit ends the session.

    /help lists the commands: /model [NAME], /clear, /thread [ID], /skills, /pin NAME, /usage.
    A line starting with // sends a literal /. On a terminal a multi-line paste is one message.

    Workspace writes and shell commands are asked about at the prompt (y/N) unless --yes or
    allow under \\[workspace] in plait.toml allows them.

    A tool call held for approval (a tool marked requires_approval, a tool --require-approval
    PATTERN matches (mcp_*, run_*), and with --approve-all,
    --approve TOOL or --deny-all a gated workspace call) is shown with its arguments and skill
    and asked about inline: approve, edit its arguments, or reject with a message; the flags
    decide the calls they cover without asking, and with no terminal on standard input the
    others are rejected.
    """
    from plait.cli.display import TurnDisplay, info_console, make_console

    console = make_console()
    info = info_console(console)
    try:
        parts = attachments(attach or [])
    except ConfigurationError as exc:
        fail(str(exc), 2)
    _thread_choice(thread, continue_)
    if resume_id is not None and not resume:
        fail(
            f"plait chat takes no message argument ({resume_id!r}): type messages at the prompt; "
            "an ID goes with --resume (plait chat --resume ID).",
            2,
        )
    if resume and (thread is not None or continue_):
        fail("Give one of --thread ID, -c/--continue or --resume, not two.", 2)
    display = TurnDisplay(console, verbose=verbose, info=info, thinking=not no_thinking)
    resolved = _resolve(flags, display, mcp, trace=not no_trace)
    from plait.cli.decisions import DecisionPolicy, held_by_flag  # with the runtime

    policy = DecisionPolicy(approve_all, list(approve or []), deny_all)
    if require_approval:
        resolved.options.extra_middleware.append(held_by_flag(require_approval))
    if approve_all or approve or deny_all:
        # Gated workspace calls pause the turn; the flags decide them, the prompt the rest.
        resolved.options.workspace_approve = "pause"
    reader = reader_for()
    if isinstance(reader, LineReader):
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
    with asyncio.Runner() as runner:
        try:
            agent, closers, found = runner.run(_open(resolved.options, thread, continue_))
        except PlaitError as exc:
            expected = isinstance(exc, ThreadChoiceError)
            fail(str(exc), 2 if expected else 1)
        session = ChatSession(found or new_id(), resolved.spec, resolved.price, found is None)
        session.can_pin = resolved.options.mode is Mode.DISCLOSURE
        host = AgentHost(runner, agent, session, resolved, flags, display, policy)
        try:
            if resume:
                _resume(runner, agent, session, resume_id or "", info)
            _thread_line(info, f"plait chat — thread {session.thread_id}. /help for commands.")
            if not session.new_thread:
                snapshot = runner.run(agent.store.load(session.thread_id))
                for line in recap_lines(snapshot):
                    info.print(Text(line, style="dim"), soft_wrap=True)
            if verbose:
                _print_order(info, agent)
            _chat_loop(runner, host, reader, display, info, resolved, parts)
        finally:
            runner.run(_close(agent, [*closers, *host.closers]))
    _thread_line(info, f"thread: {session.thread_id}")


def _resume(
    runner: asyncio.Runner, agent: Agent, session: ChatSession, given: str, console: Console
) -> None:
    """``--resume``: continue the thread ``given`` names (a unique prefix), or when ``given`` is
    empty list the :data:`RESUME_LIMIT` most recent threads and read a number (Enter: a new
    thread). A usage error (no threads, a bad number or prefix) exits 2, after closing."""
    store = agent.store
    try:
        if given:
            hint = "Leave out --resume ID to pick from a list; see: plait threads list"
            session.thread_id = runner.run(resolve_thread_id(store, given, hint))
            session.new_thread = False
            return
        ids = runner.run(store.list_threads())[:RESUME_LIMIT]
        if not ids:
            raise ConfigurationError("There is no thread to resume yet. Leave out --resume.")
        snapshots = [runner.run(store.load(i)) for i in ids]
        console.print(Text("recent threads:", style="bold"))
        for line in resume_lines(snapshots):
            console.print(Text(line), soft_wrap=True)
        try:
            console.print(Text(f"resume which? [1-{len(ids)}, Enter: a new thread] "), end="")
            answer = input()
        except EOFError:
            answer = ""
        except KeyboardInterrupt:
            console.print()
            raise typer.Exit(130) from None
        chosen = pick(answer, len(ids))
    except PlaitError as exc:
        raise typer.Exit(_usage_error(str(exc))) from None
    if chosen is not None:
        session.thread_id, session.new_thread = ids[chosen], False


def _usage_error(message: str) -> int:
    report_error(message)
    return 2


def _chat_loop(
    runner: asyncio.Runner,
    host: AgentHost,
    reader: Reader,
    display: TurnDisplay,
    console: Console,
    resolved: Resolved,
    parts: list[Part],
) -> None:
    session = host.session
    while not session.done:
        try:
            line = read_line(reader.read(runner))
        except EOFError:
            console.print()
            return
        except KeyboardInterrupt:
            console.print()
            continue
        if line is None:
            continue
        if isinstance(line, Slash):
            for shown in run_slash(host, line):
                console.print(Text(shown), soft_wrap=True)
            continue
        message = user_message(line, parts)
        parts = []  # attachments go with the first message only
        try:
            runner.run(_chat_turn(host.agent, message, session, display, host.policy))
            _trace_line(console, resolved.options)
        except KeyboardInterrupt:
            console.print(Text("(turn cancelled; what was already saved is kept)", style="yellow"))
        except PlaitError as exc:
            report_error(_error_message(exc))


async def _chat_turn(
    agent: Agent,
    message: str | UserMessage,
    session: ChatSession,
    display: TurnDisplay,
    policy: DecisionPolicy | None = None,
) -> None:
    """One turn on the session's thread with its model, the skills ``/pin`` queued (sent as
    ``pinned_skills``, then dropped once the turn finished) and its usage added up. A turn that
    pauses is decided (:mod:`plait.cli.decisions`: the flags, else the person at the terminal,
    else a rejection) and resumed until it ends; a thread left paused (continued with
    ``--thread``, or a decision cancelled with Ctrl-C) is decided first."""
    from plait.cli.decisions import person_at, settle_pending
    from plait.runtime.pause import paused_dispatch
    from plait.skills.disclosure.pins import PINNED_KEY

    state: dict[str, Any] = {
        THREAD_INFO_KEY: {"model": session.spec, "updated": datetime.now(UTC).isoformat()}
    }
    if session.new_thread:  # the folder -c looks for (plait.cli.thread_choice)
        state.update(started_in())
    if session.pins:
        state[PINNED_KEY] = list(session.pins)
    printer = _SessionPrinter(display, session)
    console, stdin = person_at(display.info)
    paused = paused_dispatch((await agent.store.load(session.thread_id)).state)
    if paused is not None:  # a new turn would be refused (ThreadPaused): decide it first
        note = "This thread has a paused turn: its held calls are decided first."
        display.info.print(Text(note, style="yellow"), soft_wrap=True)
        await settle_pending(
            agent, session.thread_id, paused.pending, printer, policy, console=console, stdin=stdin
        )
    stream = agent.stream(message, thread_id=session.thread_id, state=state)
    try:
        async for event in stream:
            printer(event)
    finally:
        display.finish()
    result = stream.result
    if result is not None and result.paused:
        await settle_pending(
            agent, session.thread_id, result.pending, printer, policy, console=console, stdin=stdin
        )


class _SessionPrinter:
    """The display, counting each finished turn (a resumed one included) into the session."""

    def __init__(self, display: TurnDisplay, session: ChatSession) -> None:
        self.display, self.session = display, session

    def __call__(self, event: Event) -> None:
        from plait.runtime.events import TurnFinished

        self.display(event)
        if isinstance(event, TurnFinished):
            self.session.usage += event.usage
            self.session.turns += 1
            self.session.new_thread = False
            self.session.pins = []

    def finish(self) -> None:
        self.display.finish()
