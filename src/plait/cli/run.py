"""``plait run`` (one turn) and ``plait chat`` (an interactive session)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from plait.cli.agents import AgentOptions, Mode, build_agent, choose_model
from plait.cli.console import EventPrinter
from plait.errors import ConfigurationError, PlaitError
from plait.messages import new_id
from plait.runtime.agent import Agent

__all__ = ["chat", "run"]

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
    str | None, typer.Option("--thread", help="Continue this thread (default: a new one).")
]
StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="SQLite file for threads (default: the user data directory)."),
]
ScriptsOption = Annotated[
    bool,
    typer.Option("--allow-scripts", help="Managed mode: let skills' scripts/ run as tools."),
]
TokensOption = Annotated[
    int, typer.Option("--max-input-tokens", help="Summarize history beyond this budget.")
]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show every event.")]


def _options(
    model: str | None,
    skills: list[Path] | None,
    mode: Mode,
    store: Path | None,
    allow_scripts: bool,
    max_input_tokens: int,
    console: Console,
) -> AgentOptions:
    try:
        chosen = choose_model(model)
    except ConfigurationError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(2) from None
    for folder in skills or []:
        if not folder.exists():
            console.print(f"[red]Skills folder not found: {escape(str(folder))}[/red]")
            raise typer.Exit(2)
    return AgentOptions(
        model=chosen,
        skills=skills or [],
        mode=mode,
        store=store,
        allow_scripts=allow_scripts,
        max_input_tokens=max_input_tokens,
    )


async def _turn(agent: Agent, text: str, thread_id: str, printer: EventPrinter) -> None:
    try:
        async for event in agent.stream(text, thread_id=thread_id):
            printer(event)
    finally:
        printer.finish()


async def _close(agent: Agent, closers: list[Any]) -> None:
    for closer in closers:
        await closer.dispose()
    aclose = getattr(agent.model, "aclose", None)
    if aclose is not None:
        await aclose()


def run(
    task: Annotated[str, typer.Argument(help="What the agent should do.")],
    skills: SkillsOption = None,
    model: ModelOption = None,
    mode: ModeOption = Mode.DISCLOSURE,
    thread: ThreadOption = None,
    store: StoreOption = None,
    allow_scripts: ScriptsOption = False,
    max_input_tokens: TokensOption = 100_000,
    verbose: VerboseOption = False,
) -> None:
    """Run one turn: stream the answer and show tool calls, skills and context events."""
    console = Console(highlight=False)
    options = _options(model, skills, mode, store, allow_scripts, max_input_tokens, console)
    thread_id = thread or new_id()

    async def main() -> None:
        agent, closers = await build_agent(options)
        try:
            await _turn(agent, task, thread_id, EventPrinter(console, verbose=verbose))
        finally:
            await _close(agent, closers)

    try:
        asyncio.run(main())
    except PlaitError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        console.print(f"[dim]thread: {thread_id}[/dim]")
        raise typer.Exit(1) from None
    console.print(f"[dim]thread: {thread_id} (continue with --thread {thread_id})[/dim]")


def chat(
    skills: SkillsOption = None,
    model: ModelOption = None,
    mode: ModeOption = Mode.DISCLOSURE,
    thread: ThreadOption = None,
    store: StoreOption = None,
    allow_scripts: ScriptsOption = False,
    max_input_tokens: TokensOption = 100_000,
    verbose: VerboseOption = False,
) -> None:
    """An interactive session. Ctrl-C cancels the running turn; Ctrl-D or /exit ends the session."""
    console = Console(highlight=False)
    options = _options(model, skills, mode, store, allow_scripts, max_input_tokens, console)
    thread_id = thread or new_id()
    printer = EventPrinter(console, verbose=verbose)
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    console.print(f"[dim]plait chat — thread {thread_id}. Ctrl-D or /exit to leave.[/dim]")
    with asyncio.Runner() as runner:
        agent, closers = runner.run(build_agent(options))
        try:
            _chat_loop(runner, agent, thread_id, printer, console)
        finally:
            runner.run(_close(agent, closers))
    console.print(f"[dim]thread: {thread_id}[/dim]")


def _chat_loop(
    runner: asyncio.Runner, agent: Agent, thread_id: str, printer: EventPrinter, console: Console
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
        except KeyboardInterrupt:
            console.print("[yellow](turn cancelled; what was already saved is kept)[/yellow]")
        except PlaitError as exc:
            console.print(f"[red]{escape(str(exc))}[/red]")
