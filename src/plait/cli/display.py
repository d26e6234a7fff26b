"""What ``plait run`` / ``plait chat`` show while a turn runs, so the terminal is never silent.

* A spinner with the seconds waited, from the moment a request goes to the model until its first
  words (or its answer) arrive; only on a terminal.
* One line per retry of a model call (``rate limited, retrying in 1.0 s (2/4)``).
* The answer as Markdown on a terminal; as the model wrote it when piped or with ``--plain``.
* After each turn, its tokens (``in 1,234 · out 56 · cached 1,000``) and, when the model's price
  is known (:mod:`plait.pricing`), what they cost.

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
from plait.messages import Usage
from plait.pricing import Price, cost
from plait.runtime.events import (
    ModelCallRetried,
    ModelRequestSent,
    ModelResponseReceived,
    TextDeltaReceived,
    TurnFinished,
)

if TYPE_CHECKING:
    from plait.middleware.context import Event
    from plait.models.retrying import RetryNotice

__all__ = ["TurnDisplay", "make_console", "retry_line", "usage_line"]


def make_console(*, stderr: bool = False) -> Console:
    """A console that never turns text into markup highlights or emoji (``:x:`` stays ``:x:``)."""
    return Console(stderr=stderr, highlight=False, emoji=False)


def usage_line(usage: Usage, price: Price | None = None) -> str:
    """``in 1,234 · out 56 · cached 1,000 · $0.0042`` (cached only when some were; the cost only
    with a ``price``)."""
    parts = [f"in {usage.input_tokens:,}", f"out {usage.output_tokens:,}"]
    if usage.cache_read_tokens:
        parts.append(f"cached {usage.cache_read_tokens:,}")
    if price is not None:
        dollars = cost(usage, price)
        parts.append(f"${dollars:.4f}" if dollars < 1 else f"${dollars:,.2f}")
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
    """``waiting for the model… 12 s``: rendered afresh on every refresh of the spinner."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __rich__(self) -> Text:
        return Text(f"waiting for the model… {time.monotonic() - self.started:.0f} s")


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
    ) -> None:
        self.console = console
        self.printer = EventPrinter(console, verbose=verbose)
        self.live = console.is_terminal
        self.markdown = self.live if markdown is None else markdown
        self.price = price
        self._status: Status | None = None
        self._answer: Live | None = None
        self._view = _MarkdownView()

    def __call__(self, event: Event) -> None:
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
            self.console.print(Text(usage_line(event.usage, self.price), style="dim"))

    @property
    def spinning(self) -> bool:
        """Whether the spinner is showing (only ever on a terminal)."""
        return self._status is not None

    def retry(self, notice: RetryNotice | ModelCallRetried) -> None:
        """One yellow line for a retry of the model call (the turn's ``ModelCallRetried``
        events come here); the spinner resumes after it."""
        spinning = self._status is not None
        self._stop_spinner()
        self._end_answer()
        self.printer.finish()
        self.console.print(Text(retry_line(notice), style="yellow"))
        if spinning:
            self._spin()

    def finish(self) -> None:
        """Stop the spinner and end the answer (also after an error or Ctrl-C)."""
        self._stop_spinner()
        self._end_answer()
        self.printer.finish()

    def _spin(self) -> None:
        if self.live and self._status is None:
            self._status = self.console.status(_Waiting(), spinner="dots")
            self._status.start()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

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
