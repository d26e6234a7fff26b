"""What ``plait run`` / ``plait chat`` show while a turn runs, so the terminal is never silent.

* A spinner with the seconds waited, from the moment a request goes to the model until its first
  words (or its answer) arrive; only on a terminal.
* One line per retry of a model call (``rate limited, retrying in 1.0 s (2/4)``).
* The answer as Markdown on a terminal; as the model wrote it when piped or with ``--plain``.
* After each turn, its tokens (``in 1,234 · out 56 · cached 1,000``) and, when the model's price
  is known (:mod:`plait.pricing`), what they cost.
* The model's thinking (``ReasoningDeltaReceived``), folded: the spinner counts it
  (``thinking… 1,234 characters``), then one dim line holds its first line and its length; with
  ``-v`` it streams dimmed as it comes; ``--no-thinking`` hides it.

Only the answer goes to ``console``; every other line goes to ``info``, which is standard error
when standard output is not a terminal (``plait run ... > answer.txt`` holds the answer only).

Everything else (tool calls, skills, context events) is :class:`~plait.cli.console.EventPrinter`'s.
Text from models and servers is never read as rich markup or emoji codes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.status import Status
from rich.text import Text

from plait.cli.console import EventPrinter
from plait.cli.subagents import progress_line
from plait.messages import Usage
from plait.pricing import Price, cache_savings, cost
from plait.runtime.events import (
    ModelCallRetried,
    ModelRequestSent,
    ModelResponseReceived,
    ReasoningDeltaReceived,
    TextDeltaReceived,
    TurnFinished,
)

if TYPE_CHECKING:
    from plait.middleware.context import Event
    from plait.models.retrying import RetryNotice

__all__ = ["TurnDisplay", "info_console", "make_console", "retry_line", "usage_line"]


def make_console(*, stderr: bool = False) -> Console:
    """A console that never turns text into markup highlights or emoji (``:x:`` stays ``:x:``)."""
    return Console(stderr=stderr, highlight=False, emoji=False)


def info_console(console: Console) -> Console:
    """Where everything but the answer goes: ``console`` itself on a terminal, else standard
    error (so a pipe or a file gets the answer only)."""
    return console if console.is_terminal else make_console(stderr=True)


def _dollars(amount: float) -> str:
    return f"${amount:.4f}" if abs(amount) < 1 else f"${amount:,.2f}"


def usage_line(usage: Usage, price: Price | None = None) -> str:
    """``in 1,234 · out 56 · cached 1,000 (81%) · $0.0042 (saved $0.0027)``: the cache reads
    and their share of the input only when some were read, the cost only with a ``price`` (and
    what the cache saved against the same tokens uncached, when it saved anything)."""
    parts = [f"in {usage.input_tokens:,}", f"out {usage.output_tokens:,}"]
    if usage.cache_read_tokens:
        share = usage.cache_read_tokens / max(usage.input_tokens, 1)
        parts.append(f"cached {usage.cache_read_tokens:,} ({share:.0%})")
    if price is not None:
        text = _dollars(cost(usage, price))
        saved = cache_savings(usage, price)
        if usage.cache_read_tokens and saved > 0:
            text += f" (saved {_dollars(saved)})"
        parts.append(text)
    return " · ".join(parts)


def _reason(error: Any) -> str:
    status = getattr(error, "status", None)
    if status == 429:
        return "rate limited"
    if status in (503, 529):
        return "server overloaded"
    if status is None:
        return "connection failed"
    return f"server error {status}"


def retry_line(notice: RetryNotice | ModelCallRetried) -> str:
    """``rate limited, retrying in 1.0 s (2/4)``: why, how long, which retry of how many."""
    return (
        f"{_reason(notice.error)}, retrying in {notice.delay:.1f} s "
        f"({notice.retry}/{notice.max_retries})"
    )


class _Waiting:
    """``waiting for the model… 12 s`` (``thinking… 1,234 characters · 12 s`` while the model
    thinks): rendered afresh on every refresh of the spinner."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.thinking = 0

    def __rich__(self) -> Text:
        seconds = f"{time.monotonic() - self.started:.0f} s"
        if self.thinking:
            return Text(f"thinking… {self.thinking:,} characters · {seconds}", style="dim")
        return Text(f"waiting for the model… {seconds}")


def thinking_line(text: str) -> str:
    """``thinking: First line of it… (1,234 characters)``: a folded thought."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > 100:
        first = first[:99] + "…"
    return f"thinking: {first} ({len(text):,} characters)"


class TurnDisplay:
    """Show a turn's events on ``console``: call it with each event (a retry of the model call
    arrives as a ``ModelCallRetried``), and :meth:`finish` when the turn ends (also when it
    fails)."""

    def __init__(
        self,
        console: Console,
        *,
        verbose: bool = False,
        markdown: bool | None = None,
        price: Price | None = None,
        info: Console | None = None,
        thinking: bool = True,
    ) -> None:
        self.console = console
        self.info = console if info is None else info
        self.printer = EventPrinter(console, verbose=verbose, info=self.info)
        self.live = console.is_terminal
        self.markdown = self.live if markdown is None else markdown
        self.price = price
        self.thinking = thinking
        """``False`` (``--no-thinking``): the model's thinking is not shown."""
        self._thought: list[str] = []
        self._thinking_streamed = False
        self._waiting: _Waiting | None = None
        self._status: Status | None = None
        self._answer: Live | None = None
        self._view = _MarkdownView()

    def __call__(self, event: Event) -> None:
        if isinstance(event, ReasoningDeltaReceived):
            self._think(event.text)
            return
        self._end_thought()
        if event.type in ("subagent_event_relayed", "model_call_rerouted"):
            line = progress_line(event, self.printer.verbose)
            if line is not None:
                self.retry_like(line)
            return
        if isinstance(event, ModelCallRetried):
            self.retry(event)
            return
        if isinstance(event, ModelRequestSent):
            self._end_answer()
            self._spin()
            if self.printer.verbose:
                self._stop_spinner()
                self.printer(event)
                self._spin()
            return
        if isinstance(event, TextDeltaReceived):
            self._stop_spinner()
            if self.markdown:
                self._add_text(event.text)
            else:
                self.printer(event)
            return
        self._stop_spinner()
        if not isinstance(event, ModelResponseReceived) or self.printer.verbose:
            self._end_answer()
        self.printer(event)
        if isinstance(event, TurnFinished):
            self._end_answer()
            self.printer.finish()
            self.info.print(Text(usage_line(event.usage, self.price), style="dim"))

    @property
    def spinning(self) -> bool:
        """Whether the spinner is showing (only ever on a terminal)."""
        return self._status is not None

    def retry_like(self, line: str) -> None:
        """A dim line between events (a subagent's progress, a fallback), as :meth:`retry`."""
        spinning = self._status is not None
        self._stop_spinner()
        self._end_answer()
        self.printer.finish()
        self.info.print(Text(line, style="dim"))
        if spinning:
            self._spin()

    def retry(self, notice: RetryNotice | ModelCallRetried) -> None:
        """One yellow line for a retry of the model call (the turn's ``ModelCallRetried``
        events come here); the spinner resumes after it."""
        spinning = self._status is not None
        self._stop_spinner()
        self._end_answer()
        self.printer.finish()
        self.info.print(Text(retry_line(notice), style="yellow"))
        if spinning:
            self._spin()

    def finish(self) -> None:
        """Stop the spinner and end the answer (also after an error or Ctrl-C)."""
        self._end_thought()
        self._stop_spinner()
        self._end_answer()
        self.printer.finish()

    def pause(self) -> None:
        """Clear the terminal for a question to the person (an approval prompt): stop the
        spinner, end the thought and the answer so far."""
        self.finish()

    def _think(self, text: str) -> None:
        if not self.thinking or not text:
            return
        self._thought.append(text)
        if self.printer.verbose:
            self._stop_spinner()
            self._end_answer()
            self.printer.finish()
            self.info.print(Text(text, style="dim"), end="", soft_wrap=True)
            self._thinking_streamed = True
        elif self._waiting is not None:
            self._waiting.thinking += len(text)

    def _end_thought(self) -> None:
        """After the last thinking delta of a run of them: the folded line (or, with ``-v``,
        the end of the streamed thought)."""
        if not self._thought:
            return
        text = "".join(self._thought)
        self._thought = []
        if self._thinking_streamed:
            self._thinking_streamed = False
            self.info.print()
            return
        spinning = self._status is not None
        self._stop_spinner()
        self.info.print(Text(thinking_line(text), style="dim"), soft_wrap=True)
        if spinning:
            self._spin()

    def _spin(self) -> None:
        if self.info.is_terminal and self._status is None:
            self._waiting = _Waiting()
            self._status = self.info.status(self._waiting, spinner="dots")
            self._status.start()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
            self._waiting = None

    @property
    def markdown_parses(self) -> int:
        """How many times the answers so far were parsed as Markdown (once per refresh of the
        live view, at most 8 a second, and once at the end of each answer)."""
        return self._view.parses

    def _add_text(self, text: str) -> None:
        self._view.text += text
        if self._answer is None:
            # The view parses lazily, when the live display refreshes: parsing on every delta
            # would cost time quadratic in the answer's length.
            self._answer = Live(
                self._view, console=self.console, refresh_per_second=8, vertical_overflow="visible"
            )
            self._answer.start()

    def _end_answer(self) -> None:
        if self._answer is not None:
            self._answer.refresh()
            self._answer.stop()
            self._answer = None
        self._view = _MarkdownView(self._view.parses)


class _MarkdownView:
    """The answer so far, rendered as Markdown when shown; parsed again only when the text
    changed since the last rendering."""

    def __init__(self, parses: int = 0) -> None:
        self.text = ""
        self.parses = parses
        self._rendered: tuple[str, Any] | None = None

    def __rich__(self) -> Any:
        from rich.markdown import Markdown  # markdown-it costs ~50 ms to import: only when used

        text = self.text
        if self._rendered is None or self._rendered[0] is not text:
            self.parses += 1
            self._rendered = (text, Markdown(text))
        return self._rendered[1]
