"""``plait run``: one turn; and what ``plait chat`` (:mod:`plait.cli.chat`) shares with it.

Settings come from the flags, then the config files and environment (:mod:`plait.cli.config`);
what the terminal shows while a turn runs is :mod:`plait.cli.display`'s.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from plait.cli.agents import AgentOptions, Closer, build_agent
from plait.cli.approval import TerminalApprover
from plait.cli.console import JsonEventWriter, fail, report_error, report_note
from plait.cli.inputs import attachment_part, task_text, user_message
from plait.cli.mcp_servers import McpServerDidNotStart, log_lines, start_servers
from plait.cli.options import (
    ApproveAllOption,
    ApproveOption,
    DenyAllOption,
    Flags,
    RequireApprovalOption,
    Resolved,
    agent_options,
    merged_settings,
    with_flags,
)
from plait.cli.output_schema import OutputSchemaOption, load_output_schema, stream_structured
from plait.cli.thread_choice import (
    NoThreadToContinue,
    ThreadChoiceError,
    UnknownThread,
    choose_thread,
    started_in,
)
from plait.cli.ui import NoTraceOption, open_trace_store, trace_hint
from plait.errors import (
    ConfigurationError,
    ContextOverflowError,
    ModelTimeoutError,
    PlaitError,
    ThreadPaused,
)
from plait.messages import Part, UserMessage, new_id
from plait.models.registry import MODEL_SPEC_FORMS
from plait.skills.skill_file import is_skill_file_name

if TYPE_CHECKING:  # the display and the agent load with run and chat, not with every command
    from plait.cli.decisions import DecisionPolicy
    from plait.cli.display import TurnDisplay
    from plait.runtime.agent import Agent

__all__ = [
    "MODEL_EPILOG",
    "THREAD_INFO_KEY",
    "NoThreadToContinue",
    "UnknownThread",
    "attachments",
    "check_skills_folders",
    "run",
]


THREAD_INFO_KEY = "plait_cli"
"""Thread state the CLI writes at each turn: ``{"model": spec, "updated": ISO time}``, which
``plait threads list`` shows."""


ThreadOption = Annotated[
    str | None,
    typer.Option(
        "--thread", help="Continue this existing thread (see: plait threads list). Default: new."
    ),
]
ContinueOption = Annotated[
    bool, typer.Option("--continue", "-c", help="Continue the most recent thread.")
]
McpOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        help="An MCP server (repeatable): NAME=COMMAND (stdio) or NAME=URL (Streamable HTTP); "
        "its tools are named NAME_<tool>.",
    ),
]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Show the middleware order and every event.")
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Write every event as a JSON line instead (for scripts).")
]
AttachOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--attach",
        "-a",
        help="Send a file with the task (repeatable): an image (PNG, JPEG, GIF, WebP) or PDF "
        "as itself, a text file inlined under its name.",
    ),
]
NoThinkingOption = Annotated[
    bool, typer.Option("--no-thinking", help="Hide the model's thinking (shown folded, dimmed).")
]
FLAGS = Flags()
"""The default of a ``flags`` parameter (typer never sees it: :func:`with_flags` replaces it)."""


def _mcp_servers(options: list[str]) -> dict[str, Any]:
    """``--mcp`` values as ``{name: settings}``; a repeated name or a bad value is a
    :class:`~plait.errors.ConfigurationError`. Imports :mod:`plait.mcp` only when given."""
    if not options:
        return {}
    from plait.mcp import parse_mcp_option

    servers: dict[str, Any] = {}
    for text in options:
        name, settings = parse_mcp_option(text)
        if name in servers:
            raise ConfigurationError(f"--mcp names the server {name!r} twice; rename one.")
        servers[name] = settings
    return servers


MODEL_EPILOG = "--model spec forms:\n\n" + "\n\n".join(
    f"  {form}"
    for form in (*MODEL_SPEC_FORMS, "e.g. openai-compatible:llama3.1@http://localhost:11434/v1")
)
"""The end of ``run --help`` / ``chat --help``: every model spec form on its own line, whole at 80
columns (an option's help column is too narrow for them)."""


def _resolve(
    flags: Flags,
    display: TurnDisplay | JsonEventWriter,
    mcp: list[str] | None = None,
    trace: bool = True,
) -> Resolved:
    """The merged settings turned into the agent's options; a bad config, a bad ``--mcp``, a
    missing provider or a missing skills folder is a message and exit 2. ``--mcp`` servers join
    the config's ``[mcp.*]`` servers (a flag wins over a config entry of the same name). A
    terminal display learns here whether to render Markdown and the model's price."""
    try:
        settings = merged_settings(flags)
        resolved = agent_options(settings)  # retries arrive as ModelCallRetried events
        servers: dict[str, Any] = {**resolved.mcp, **_mcp_servers(mcp or [])}
        if servers:
            from plait.mcp import servers_from_mapping

            servers_from_mapping(servers)  # checks every setting before the model is called
    except ConfigurationError as exc:
        fail(str(exc), 2)
    check_skills_folders(list(resolved.options.skills), settings.origins.get("skills", ""))
    resolved.options.mcp = servers
    if not isinstance(display, JsonEventWriter):
        display.markdown = _markdown(display, resolved, flags.plain)
        display.price = resolved.price
        if sys.stdin is not None and sys.stdin.isatty():
            # Someone is at the terminal: a gated workspace call asks them.
            approver = TerminalApprover(display.info, before=display.pause)
            resolved.options.workspace_approve = approver
    if trace:
        from plait.trace import TraceRecorder

        store = resolved.options.store
        recorder = TraceRecorder(open_trace_store(store), agent="plait")
        resolved.options.leading_middleware = [recorder]
    if flags.quiet:  # before the recorder: the trace still records every warning
        from plait.cli.quiet import QuietSkillWarnings

        resolved.options.leading_middleware.insert(0, QuietSkillWarnings())
    return resolved


def _trace_line(console: Console, options: AgentOptions) -> None:
    """After a recorded turn: how to open its trace (nothing when ``--no-trace``)."""
    from plait.trace import TraceRecorder

    for m in options.leading_middleware:
        if isinstance(m, TraceRecorder) and m.last_run_id is not None:
            _thread_line(console, trace_hint(m.last_run_id, options.store))


def _markdown(display: TurnDisplay, resolved: Resolved, flag: bool | None) -> bool:
    """Render answers as Markdown: ``--markdown`` always, ``--plain`` (or ``plain = true``)
    never, else only on a terminal."""
    return not resolved.plain and (display.live or flag is False)


def check_skills_folders(folders: list[Path], origin: str = "") -> None:
    """Exit 2 with a message unless every path is a folder or a SKILL.md file (any letter case,
    as the sources accept it); ``origin`` (where the folders were listed: flags, config files)
    is named in the message."""
    where = f" (skills from {origin})" if origin else ""
    for folder in folders:
        if not folder.exists():
            fail(f"Skills folder not found: {folder}{where}", 2)
        if not folder.is_dir() and not is_skill_file_name(folder.name):
            fail(
                f"Not a skills folder: {folder} "
                "(give a folder of skills, a skill's folder or its SKILL.md)",
                2,
            )


def _thread_line(console: Console, text: str) -> None:
    """One dim line naming the thread; never wrapped inside the id, so it can be copied."""
    console.print(Text(text, style="dim"), soft_wrap=True)


async def _open(
    options: AgentOptions, thread: str | None, latest: bool
) -> tuple[Agent, list[Closer], str | None]:
    """:func:`build_agent`, then the thread to continue (:func:`choose_thread`: the one
    ``thread`` names, a whole id or a unique prefix; the latest one started in this folder when
    ``latest``; else ``None``, a new thread). On failure, close what was built and raise (a
    :class:`ThreadChoiceError`, or the store's error)."""
    agent, closers = await build_agent(options)
    try:
        thread = await choose_thread(agent.store, thread, latest)
    except BaseException:
        await _close(agent, closers)
        raise
    return agent, closers, thread


async def _turn(
    agent: Agent,
    text: str | UserMessage,
    thread_id: str,
    printer: TurnDisplay | JsonEventWriter,
    spec: str,
    new_thread: bool = False,
    output: Any = None,  # --output-schema: (spec, validator) from load_output_schema
    policy: DecisionPolicy | None = None,  # what --approve-all/--approve/--deny-all decide
) -> None:
    state: dict[str, Any] = {
        THREAD_INFO_KEY: {"model": spec, "updated": datetime.now(UTC).isoformat()}
    }
    if new_thread:  # the folder -c looks for (plait.cli.thread_choice)
        state.update(started_in())
    if output is not None:
        try:
            await stream_structured(agent, text, thread_id, state, printer, output)
        finally:
            printer.finish()
        return
    stream = agent.stream(text, thread_id=thread_id, state=state)
    try:
        async for event in stream:
            printer(event)
    finally:
        printer.finish()
    if stream.result is not None and stream.result.paused:  # held calls: ask, or deny
        from plait.cli.decisions import person_at, settle_pending

        console, stdin = person_at(getattr(printer, "info", None))
        await settle_pending(
            agent, thread_id, stream.result.pending, printer, policy, console=console, stdin=stdin
        )


def _print_order(console: Console, agent: Agent) -> None:
    """``-v``: the agent's resolved middleware order, before the first turn."""
    console.print(Text(f"middleware, in order:\n{agent.describe()}", style="dim"))


async def _close(agent: Agent, closers: list[Closer]) -> None:
    for close in closers:
        await close()


def _thread_choice(thread: str | None, continue_: bool) -> None:
    if thread is not None and continue_:
        fail("Give --thread ID or -c/--continue, not both.", 2)


def _error_message(exc: PlaitError) -> str:
    """The error as the person at the terminal can act on it (an overflow names CLI flags)."""
    if isinstance(exc, ModelTimeoutError):
        return (
            f"The model gave no complete answer within its {exc.total:g} s deadline. Check that "
            "the server is "
            "up and reachable, or allow more time with --timeout SECONDS (or timeout in "
            "plait.toml, or $PLAIT_MODEL_TIMEOUT)."
        )
    if isinstance(exc, ThreadPaused):
        return (
            f"Thread {exc.thread_id} has a paused turn: {len(exc.call_ids)} tool call(s) wait "
            f"for a decision. Decide them first: plait threads resume {exc.thread_id} (at the "
            "prompt, or with --approve-all, --approve TOOL or --deny-all); plait chat "
            f"--thread {exc.thread_id} asks about them before the next message."
        )
    if isinstance(exc, ContextOverflowError):
        return (
            "The conversation no longer fits the model's context window, even after "
            "summarizing. Start a new thread (leave out -c/--thread), lower --max-input-tokens "
            "(or limits.max_input_tokens in plait.toml), or choose a model with a larger window "
            "(--model)."
        )
    return str(exc)


@with_flags
def run(
    task: Annotated[
        str | None,
        typer.Argument(
            help="What the agent should do; '-' or none: read it from standard input (piped "
            "text is also added after a TASK given here, at most 1 MiB)."
        ),
    ] = None,
    flags: Flags = FLAGS,
    attach: AttachOption = None,
    thread: ThreadOption = None,
    continue_: ContinueOption = False,
    mcp: McpOption = None,
    verbose: VerboseOption = False,
    json_lines: JsonOption = False,
    no_thinking: NoThinkingOption = False,
    no_trace: NoTraceOption = False,
    output_schema: OutputSchemaOption = None,
    approve_all: ApproveAllOption = False,
    approve: ApproveOption = None,
    deny_all: DenyAllOption = False,
    require_approval: RequireApprovalOption = None,
) -> None:
    """Run one turn: stream the answer and show tool calls, skills and context events.

    The agent works on the current folder with the workspace tools: ls, read_file, glob and
    grep freely; write_file, edit_file and shell (sandboxed in bubblewrap, no network unless
    network = true under \\[workspace]) only once allowed: --yes, allow = \\["write", "shell"]
    under \\[workspace] in plait.toml, or a y at the prompt when a terminal is on standard input
    (with none, they are refused and the model is told how to ask). AGENTS.md and CLAUDE.md
    of the folder and its parents join the system prompt. --no-workspace turns all this off.

    The task: the argument, or standard input when piped (echo TASK | plait run, or plait run -);
    piped text is added after a task argument. At most 1 MiB is read from standard input.

    When standard output is not a terminal it gets the answer only (plait run TASK >
    answer.txt); usage, tool, thread and trace lines go to standard error.

    A tool call held for approval (a tool marked requires_approval, an ApprovalMiddleware, a
    tool --require-approval PATTERN matches, and with one of these flags a gated workspace
    call) is asked about at the terminal; --approve-all, --approve TOOL (e.g. --approve
    write_file) and --deny-all decide without asking, and with nobody to ask it is rejected.
    """
    from plait.cli.display import TurnDisplay, info_console, make_console

    console = make_console()
    info = info_console(console)
    try:
        text = task_text(task)
        parts = attachments(attach or [])
        output = load_output_schema(output_schema) if output_schema else None
    except ConfigurationError as exc:
        fail(str(exc), 2)
    if not text.strip():
        fail(
            'The task is empty: say what the agent should do (plait run "TASK", or pipe it: '
            "echo TASK | plait run).",
            2,
        )
    _thread_choice(thread, continue_)
    printer: TurnDisplay | JsonEventWriter = (
        JsonEventWriter(skip_reasoning=no_thinking)
        if json_lines
        else TurnDisplay(console, verbose=verbose, info=info, thinking=not no_thinking)
    )
    resolved = _resolve(flags, printer, mcp, trace=not no_trace)
    from plait.cli.decisions import DecisionPolicy, held_by_flag  # with the runtime

    policy = DecisionPolicy(approve_all, list(approve or []), deny_all)
    if require_approval:
        resolved.options.extra_middleware.append(held_by_flag(require_approval))
    if approve_all or approve or deny_all:
        # Gated workspace calls pause the turn, and these flags decide them, call by call.
        resolved.options.workspace_approve = "pause"
    thread_id = thread or new_id()

    async def main() -> None:
        nonlocal thread_id
        agent, closers, found = await _open(resolved.options, thread, continue_)
        thread_id = found or thread_id
        try:
            if verbose and not json_lines:
                _print_order(info, agent)
                for line in log_lines(agent):
                    info.print(Text(line, style="dim"), soft_wrap=True)
            await start_servers(agent)  # one that cannot start fails the run (exit 1)
            await _turn(
                agent,
                user_message(text, parts),
                thread_id,
                printer,
                resolved.spec,
                found is None,
                output,
                policy,
            )
        finally:
            await _close(agent, closers)

    try:
        asyncio.run(main())
    except ThreadChoiceError as exc:
        fail(str(exc), 2)
    except McpServerDidNotStart as exc:
        fail(str(exc), 1)
    except PlaitError as exc:
        report_error(_error_message(exc))
        _last_line(printer, info, thread_id, f"thread: {thread_id}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        report_note("(cancelled; what was already saved is kept)")
        _last_line(printer, info, thread_id)
        raise typer.Exit(130) from None
    _last_line(printer, info, thread_id)
    if not isinstance(printer, JsonEventWriter):
        _trace_line(info, resolved.options)


def attachments(paths: list[Path]) -> list[Part]:
    """``--attach`` files as message parts; raises :class:`~plait.errors.ConfigurationError`
    for the first that cannot be attached (see :mod:`plait.cli.inputs`)."""
    return [attachment_part(path) for path in paths]


def _last_line(
    printer: TurnDisplay | JsonEventWriter, console: Console, thread_id: str, text: str = ""
) -> None:
    """The thread a ``run`` used, as its last line: a ``{"type": "thread"}`` line on standard
    output with ``--json`` (so every line stays JSON, whether the turn succeeded, failed or was
    cancelled), else ``text`` (default: how to continue it) on ``console`` (standard error
    when standard output is piped)."""
    if isinstance(printer, JsonEventWriter):
        printer.emit({"type": "thread", "thread_id": thread_id})
        return
    _thread_line(console, text or f"thread: {thread_id} (continue with -c or --thread {thread_id})")
