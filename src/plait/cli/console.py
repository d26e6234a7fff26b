"""Showing a turn's events on a terminal, as they happen.

:class:`EventPrinter` streams answer text as it arrives and prints one dim line for everything
else worth seeing: tool calls and results, skill reads and loads, evictions, summaries, guard
interventions and errors. Events it has no special line for are shown by their ``type`` and
their short fields, so a battery's new events are never invisible.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

if TYPE_CHECKING:
    from plait.middleware.context import Event
    from plait.models.retrying import RetryNotice
    from plait.runtime.events import (
        ErrorOccurred,
        ModelCallRetried,
        ToolCallFinished,
        ToolCallStarted,
    )

__all__ = ["EventPrinter", "JsonEventWriter", "fail", "report_error", "report_note", "short"]


def report_error(message: str) -> None:
    """Print ``message`` in red on standard error (where a shell user expects errors), as
    written: never read as markup or emoji codes (a server's ``:x:`` stays ``:x:``)."""
    # soft_wrap: the terminal wraps, so a long path or URL is never cut in two by a newline.
    Console(stderr=True, highlight=False, emoji=False).print(
        Text(message, style="red"), soft_wrap=True
    )


def report_note(message: str) -> None:
    """Print ``message`` in yellow on standard error, as written."""
    Console(stderr=True, highlight=False, emoji=False).print(
        Text(message, style="yellow"), soft_wrap=True
    )


def fail(message: str, code: int = 1) -> NoReturn:
    """:func:`report_error`, then exit with ``code`` (1: the work failed; 2: a usage error)."""
    report_error(message)
    raise typer.Exit(code)


def short(value: Any, limit: int = 120) -> str:
    """``value`` as one line of at most ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fields(event: Event) -> str:
    parts = []
    if is_dataclass(event):
        for f in fields(event):
            value = getattr(event, f.name)
            if f.name == "type" or (isinstance(value, list | dict) and not value):
                continue
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                value = ",".join(value)
            if isinstance(value, str | int | float | bool):
                parts.append(f"{f.name}={short(value, 60)}")
    return " ".join(parts)


def _dim(text: str) -> str:
    return f"[dim]{escape(text)}[/dim]"


def _sandbox_note(sandbox: str) -> str:
    """How a loaded skill's script sandbox is shown; unsandboxed stands out."""
    if sandbox == "unsandboxed":
        return "[bold yellow](scripts UNSANDBOXED)[/bold yellow]"
    return _dim(f"(scripts in {sandbox})")


def _names(values: Any) -> str:
    return ", ".join(values) if values else "-"


def _battery_lines() -> dict[type[Event], Callable[[Any], str | None]]:
    """The batteries' event lines. Their classes load with the first printer: the commands that
    print no turn leave the batteries unloaded."""
    from plait.context import ContextOverflowRecovered, HistorySummarized, ResultEvicted
    from plait.guards import RepetitionDetected, ToolCallRejected
    from plait.skills.disclosure import (
        SkillCatalogLoaded,
        SkillPinned,
        SkillProblemFound,
        SkillToolsDisclosed,
        SkillToolsWithdrawn,
    )
    from plait.skills.managed import SkillLoaded, SkillUnloaded
    from plait.workspace.events import ProjectContextLoaded

    return {
        SkillCatalogLoaded: lambda e: _dim(
            f"◆ skills {e.reason}: {e.skills} available"
            + (f", {e.skipped} skipped (see diagnostics)" if e.skipped else "")
        ),
        SkillProblemFound: lambda e: (
            "[yellow]◆ skill problem[/yellow] "
            + escape(f"{e.skill or e.source_id}: {e.diagnostic.message}")
        ),
        SkillPinned: lambda e: _dim(f"◆ pinned skill {e.name}"),
        ProjectContextLoaded: _project_line,
        SkillToolsDisclosed: lambda e: (
            f"[magenta]+ tools unlocked:[/magenta] {escape(_names([*e.tools, *e.deferred]))}"
        ),
        SkillToolsWithdrawn: lambda e: (
            f"[magenta]- tools withdrawn:[/magenta] {escape(_names(e.tools))}"
        ),
        SkillLoaded: lambda e: (
            f"[magenta]◆ loaded skill {escape(e.skill)}[/magenta] "
            + _dim(f"tools: {_names(e.tools)}")
            + ("" if e.sandbox is None else " " + _sandbox_note(e.sandbox))
        ),
        SkillUnloaded: lambda e: f"[magenta]◆ unloaded skill {escape(e.skill)}[/magenta]",
        ResultEvicted: lambda e: (
            f"[blue]⇣ evicted {escape(e.tool)} result[/blue] "
            + _dim(f"({e.estimated_tokens:,} tokens) → {e.path}")
        ),
        HistorySummarized: lambda e: (
            f"[blue]≡ summarized {e.messages_removed} messages[/blue] "
            + _dim(f"({e.original_tokens:,} → {e.summarized_tokens:,} tokens, {e.summarizer})")
        ),
        ContextOverflowRecovered: lambda e: (
            "[blue]≡ context overflow recovered[/blue] "
            + _dim(f"({e.original_tokens:,} → {e.compacted_tokens:,} tokens)")
        ),
        ToolCallRejected: lambda e: (
            f"[yellow]✗ rejected {escape(e.call.name)}:[/yellow] " + _dim(short(e.reason, 100))
        ),
        RepetitionDetected: lambda e: f"[yellow]↻ repetition ({e.kind}, {e.count} times)[/yellow]",
    }


def _verbose_only() -> tuple[type[Event], ...]:
    """Events shown only with ``-v`` (every turn has one; the trace keeps them too)."""
    from plait.workspace.events import ProjectContextLoaded

    return (ProjectContextLoaded,)


def _project_line(event: Any) -> str:
    if not event.files:
        return _dim("◆ project instructions: none (no AGENTS.md or CLAUDE.md)")
    names = ", ".join(
        f"{f.path} ({f.chars:,} chars{', cut' if f.cut else ''})" for f in event.files
    )
    return _dim(f"◆ project instructions: {names}")


# Matched by ``type``: importing the event class would load plait.mcp for every run and chat,
# and the event only comes from servers that --mcp or the config file named.
_LINES_BY_TYPE: dict[str, Callable[[Any], str | None]] = {
    "mcp_server_skipped": lambda e: (
        f"[yellow]! MCP server {escape(e.server)} skipped, its tools are left out:[/yellow] "
        + escape(e.reason)
        + " "
        + _dim(f"(retry in {e.retry_in:.0f} s)")
    ),
    "mcp_tools_skipped": lambda e: (
        f"[yellow]! MCP tools of {escape(e.server)} left out:[/yellow] "
        + escape(short(e.reason, 300))
    ),
    "mcp_content_dropped": lambda e: (
        f"[yellow]! {escape(e.server)}.{escape(e.tool)} sent content that cannot be shown:"
        "[/yellow] " + escape(short("; ".join(e.notes), 300))
    ),
}


class EventPrinter:
    """Print events; call it with each event of ``agent.stream(...)``. Answer text goes to
    ``console``, every other line to ``info`` (default: ``console``; standard error when the
    answer is piped, so the pipe holds the answer only)."""

    def __init__(
        self, console: Console, *, verbose: bool = False, info: Console | None = None
    ) -> None:
        self.console = console
        self.info = console if info is None else info
        self.verbose = verbose
        self._in_text = False
        from plait.runtime import events

        self._text_delta = events.TextDeltaReceived
        self._quiet = (
            events.TurnStarted,
            events.ModelRequestSent,
            events.ModelResponseReceived,
            events.DispatchFinished,
            events.TurnFinished,
            *_verbose_only(),
        )
        self._special: dict[type[Event], Callable[[Any], str | None]] = {
            events.ToolCallStarted: self._tool_call,
            events.ToolCallFinished: self._tool_result,
            events.ErrorOccurred: self._error,
            events.ReasoningDeltaReceived: lambda e: None,  # the turn display folds these
            events.ReasoningDropped: lambda e: (
                f"[yellow]note:[/yellow] {e.count} reasoning part(s) from {escape(e.provider)} "
                "left out: this model cannot take another provider's reasoning"
            ),
            **_battery_lines(),
        }

    def __call__(self, event: Event) -> None:
        if isinstance(event, self._text_delta):
            self.console.print(escape(event.text), end="", soft_wrap=True, highlight=False)
            self._in_text = True
            return
        if isinstance(event, self._quiet) and not self.verbose:
            return
        handler = self._special.get(type(event)) or _LINES_BY_TYPE.get(event.type)
        line = handler(event) if handler else f"[dim]• {event.type}[/dim] {escape(_fields(event))}"
        if line is None:
            return
        self.finish()
        self.info.print(line, highlight=False)

    def finish(self) -> None:
        """End the current line of answer text, if any."""
        if self._in_text:
            self.console.print()
            self._in_text = False

    @staticmethod
    def _tool_call(event: ToolCallStarted) -> str:
        args = short(event.call.raw_args or event.call.args, 100)
        return f"[cyan]→ {escape(event.call.name)}[/cyan] [dim]{escape(args)}[/dim]"

    @staticmethod
    def _tool_result(event: ToolCallFinished) -> str:
        style = "red" if event.result.is_error else "green"
        mark = "✗" if event.result.is_error else "✓"
        return (
            f"[{style}]{mark} {escape(event.call.name)}[/{style}] [dim]"
            + escape(short(event.result.data, 100))
            + "[/dim]"
        )

    @staticmethod
    def _error(event: ErrorOccurred) -> str | None:
        if event.fatal:
            return None  # the command reports the turn's error itself, on standard error
        return f"[red]! recovered in {escape(event.where)}:[/red] {escape(str(event.error))}"


class JsonEventWriter:
    """Write each event as one JSON object per line (``plait run --json``), for scripts.

    Every line has ``type`` plus the event's fields; values that are not JSON (exceptions, say)
    are written as strings.
    """

    def __init__(
        self, write: Callable[[str], object] | None = None, *, skip_reasoning: bool = False
    ) -> None:
        self._write = write or (lambda line: print(line, flush=True))
        self.skip_reasoning = skip_reasoning
        """``True`` (``--no-thinking``): no ``reasoning_delta_received`` lines."""

    def __call__(self, event: Event) -> None:
        from plait.runtime.events import ModelCallRetried

        if self.skip_reasoning and event.type == "reasoning_delta_received":
            return
        if isinstance(event, ModelCallRetried):
            self.retry(event)
            return
        self.emit({f.name: getattr(event, f.name) for f in fields(event)})

    def emit(self, data: dict[str, Any]) -> None:
        from pydantic_core import to_jsonable_python

        from plait.storable import storable_text

        # An error's text may quote an undecodable file name: never let it break the output.
        line = json.dumps(to_jsonable_python(data, fallback=str), ensure_ascii=False)
        self._write(storable_text(line))

    def retry(self, notice: RetryNotice | ModelCallRetried) -> None:
        """A retry of the model call, as a ``model_call_retried`` line (``error`` as text, its
        ``status``, ``delay``, ``retry``, ``max_retries``)."""
        self.emit(
            {
                "type": "model_call_retried",
                "error": str(notice.error),
                "status": notice.error.status,
                "delay": notice.delay,
                "retry": notice.retry,
                "max_retries": notice.max_retries,
            }
        )

    def finish(self) -> None:
        return None
