"""``plait run`` (one turn) and ``plait chat`` (an interactive session)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from plait.cli.agents import (
    DEFAULT_SYSTEM_PROMPT,
    AgentOptions,
    Closer,
    Mode,
    SandboxChoice,
    build_agent,
    choose_model,
)
from plait.cli.console import EventPrinter, JsonEventWriter, fail, report_error
from plait.cli.db import STORE_HELP
from plait.cli.ui import NoTraceOption, trace_hint, trace_path
from plait.errors import ConfigurationError, PlaitError
from plait.messages import new_id
from plait.middleware.base import Middleware
from plait.runtime.agent import Agent
from plait.skills.sources import SKILL_FILE_NAMES

__all__ = ["UnknownThread", "chat", "check_skills_folders", "run"]


class UnknownThread(ConfigurationError):
    """``--thread`` names a thread the store does not hold (a typo would otherwise silently
    start a new conversation under that id)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"No thread {thread_id!r} in the thread store. Leave out --thread to start a new "
            "conversation; see: plait threads list"
        )


SkillsOption = Annotated[
    list[Path] | None,
    typer.Option("--skills", help="A skills folder (repeatable); earlier folders win clashes."),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="openai:<model>, anthropic:<model> or openai-compatible:<model>@<base_url>. "
        "Default: $PLAIT_MODEL, else whichever of OPENAI_API_KEY / ANTHROPIC_API_KEY is set.",
    ),
]
ModeOption = Annotated[
    Mode, typer.Option("--mode", help="disclosure: catalog + read_file; managed: load_skill.")
]
ThreadOption = Annotated[
    str | None,
    typer.Option(
        "--thread", help="Continue this existing thread (see: plait threads list). Default: new."
    ),
]
StoreOption = Annotated[str | None, typer.Option("--store", help=STORE_HELP)]
ScriptsOption = Annotated[
    bool,
    typer.Option("--allow-scripts", help="Managed mode: let skills' scripts/ run as tools."),
]
SandboxOption = Annotated[
    SandboxChoice,
    typer.Option(
        "--sandbox",
        help="What runs skill scripts (with --allow-scripts): bwrap = bubblewrap, no network, "
        "writes only in the skill's workspace (fails if bwrap does not work here); none = "
        "unsandboxed, as your user.",
    ),
]
TokensOption = Annotated[
    int, typer.Option("--max-input-tokens", min=1, help="Summarize history beyond this budget.")
]
SystemOption = Annotated[
    str | None,
    typer.Option("--system-prompt", help="The agent's system prompt (default: a generic one)."),
]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", "-v", help="Show the middleware order and every event.")
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Write every event as a JSON line instead (for scripts).")
]


def _options(
    model: str | None,
    skills: list[Path] | None,
    mode: Mode,
    store: str | None,
    allow_scripts: bool,
    sandbox: SandboxChoice,
    max_input_tokens: int,
    system_prompt: str | None,
    console: Console,
    trace: bool = True,
) -> AgentOptions:
    try:
        chosen = choose_model(model)
    except ConfigurationError as exc:
        fail(str(exc), 2)
    check_skills_folders(skills or [], console)
    leading: list[Middleware] = []
    if trace:
        from plait.trace import SQLiteTraceStore, TraceRecorder

        leading.append(TraceRecorder(SQLiteTraceStore(trace_path(store)), agent="plait"))
    return AgentOptions(
        leading_middleware=leading,
        model=chosen,
        skills=skills or [],
        mode=mode,
        store=store,
        allow_scripts=allow_scripts,
        sandbox=sandbox,
        max_input_tokens=max_input_tokens,
        system_prompt=DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt,
    )


def _trace_line(console: Console, options: AgentOptions) -> None:
    """After a recorded turn: how to open its trace (nothing when ``--no-trace``)."""
    from plait.trace import TraceRecorder

    for m in options.leading_middleware:
        if isinstance(m, TraceRecorder) and m.last_run_id is not None:
            _thread_line(console, trace_hint(m.last_run_id, options.store))


def check_skills_folders(folders: list[Path], console: Console) -> None:
    """Exit 2 with a message unless every path is a folder or a SKILL.md file."""
    for folder in folders:
        if not folder.exists():
            fail(f"Skills folder not found: {folder}", 2)
        if not folder.is_dir() and folder.name not in SKILL_FILE_NAMES:
            fail(
                f"Not a skills folder: {folder} "
                "(give a folder of skills, a skill's folder or its SKILL.md)",
                2,
            )


def _thread_line(console: Console, text: str) -> None:
    """One dim line naming the thread; never wrapped inside the id, so it can be copied."""
    console.print(f"[dim]{escape(text)}[/dim]", soft_wrap=True)


async def _open(options: AgentOptions, thread: str | None) -> tuple[Agent, list[Closer]]:
    """:func:`build_agent`, then check that ``thread`` (when given) exists; on failure, close
    what was built and raise (:class:`UnknownThread`, or the store's error)."""
    agent, closers = await build_agent(options)
    try:
        if thread is not None and (await agent.store.load(thread)).version == 0:
            raise UnknownThread(thread)
    except BaseException:
        await _close(agent, closers)
        raise
    return agent, closers


async def _turn(
    agent: Agent, text: str, thread_id: str, printer: EventPrinter | JsonEventWriter
) -> None:
    try:
        async for event in agent.stream(text, thread_id=thread_id):
            printer(event)
    finally:
        printer.finish()


def _print_order(console: Console, agent: Agent) -> None:
    """``-v``: the agent's resolved middleware order, before the first turn."""
    console.print(f"[dim]middleware, in order:\n{escape(agent.describe())}[/dim]")


async def _close(agent: Agent, closers: list[Closer]) -> None:
    for close in closers:
        await close()


def run(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    skills: SkillsOption = None,
    model: ModelOption = None,
    mode: ModeOption = Mode.DISCLOSURE,
    thread: ThreadOption = None,
    store: StoreOption = None,
    allow_scripts: ScriptsOption = False,
    sandbox: SandboxOption = SandboxChoice.BWRAP,
    max_input_tokens: TokensOption = 100_000,
    system_prompt: SystemOption = None,
    verbose: VerboseOption = False,
    json_lines: JsonOption = False,
    no_trace: NoTraceOption = False,
) -> None:
    """Run one turn: stream the answer and show tool calls, skills and context events."""
    console = Console(highlight=False)
    if not task.strip():
        fail("The task is empty: say what the agent should do.", 2)
    options = _options(
        model,
        skills,
        mode,
        store,
        allow_scripts,
        sandbox,
        max_input_tokens,
        system_prompt,
        console,
        trace=not no_trace,
    )
    thread_id = thread or new_id()

    printer = JsonEventWriter() if json_lines else EventPrinter(console, verbose=verbose)

    async def main() -> None:
        agent, closers = await _open(options, thread or None)
        if verbose and not json_lines:
            _print_order(console, agent)
        try:
            await _turn(agent, task, thread_id, printer)
        finally:
            await _close(agent, closers)

    try:
        asyncio.run(main())
    except UnknownThread as exc:
        fail(str(exc), 2)
    except PlaitError as exc:
        report_error(str(exc))
        _thread_line(console, f"thread: {thread_id}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        console.print("[yellow](cancelled; what was already saved is kept)[/yellow]")
        _thread_line(console, f"thread: {thread_id} (continue with --thread {thread_id})")
        raise typer.Exit(130) from None
    if isinstance(printer, JsonEventWriter):
        printer.emit({"type": "thread", "thread_id": thread_id})
        return
    _thread_line(console, f"thread: {thread_id} (continue with --thread {thread_id})")
    _trace_line(console, options)


def chat(
    skills: SkillsOption = None,
    model: ModelOption = None,
    mode: ModeOption = Mode.DISCLOSURE,
    thread: ThreadOption = None,
    store: StoreOption = None,
    allow_scripts: ScriptsOption = False,
    sandbox: SandboxOption = SandboxChoice.BWRAP,
    max_input_tokens: TokensOption = 100_000,
    system_prompt: SystemOption = None,
    verbose: VerboseOption = False,
    no_trace: NoTraceOption = False,
) -> None:
    """An interactive session. Ctrl-C cancels the running turn; Ctrl-D or /exit ends the session."""
    console = Console(highlight=False)
    options = _options(
        model,
        skills,
        mode,
        store,
        allow_scripts,
        sandbox,
        max_input_tokens,
        system_prompt,
        console,
        trace=not no_trace,
    )
    thread_id = thread or new_id()
    printer = EventPrinter(console, verbose=verbose)
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    with asyncio.Runner() as runner:
        try:
            agent, closers = runner.run(_open(options, thread or None))
        except PlaitError as exc:
            fail(str(exc), 2 if isinstance(exc, UnknownThread) else 1)
        _thread_line(console, f"plait chat — thread {thread_id}. Ctrl-D or /exit to leave.")
        if verbose:
            _print_order(console, agent)
        try:
            _chat_loop(runner, agent, thread_id, printer, console, options)
        finally:
            runner.run(_close(agent, closers))
    _thread_line(console, f"thread: {thread_id}")


def _chat_loop(
    runner: asyncio.Runner,
    agent: Agent,
    thread_id: str,
    printer: EventPrinter,
    console: Console,
    options: AgentOptions,
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
        try:
            runner.run(_turn(agent, text, thread_id, printer))
            _trace_line(console, options)
        except KeyboardInterrupt:
            console.print("[yellow](turn cancelled; what was already saved is kept)[/yellow]")
        except PlaitError as exc:
            report_error(str(exc))
