"""What the terminal shows during a turn: spinner, Markdown, retry lines, tokens and cost."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from plait.cli.display import TurnDisplay, retry_line, usage_line
from plait.errors import ProviderError
from plait.messages import AssistantMessage, Usage
from plait.models.base import ModelRequest
from plait.models.retrying import RetryNotice
from plait.pricing import Price
from plait.runtime.events import (
    ModelRequestSent,
    ModelResponseReceived,
    TextDeltaReceived,
    TurnFinished,
)


def console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=60, highlight=False, emoji=False), out


def answer(display: TurnDisplay, text: str) -> None:
    display(ModelRequestSent(dispatch=1, request=ModelRequest(messages=[])))
    for word in text.split(" "):
        display(TextDeltaReceived(dispatch=1, text=word + " "))
    display(ModelResponseReceived(dispatch=1, message=AssistantMessage(text)))
    display(TurnFinished(output=text, usage=Usage(1234, 56, 1000)))
    display.finish()


def test_a_terminal_gets_the_answer_as_markdown() -> None:
    terminal, out = console(True)
    answer(TurnDisplay(terminal), "Use **bold** and `code` here")
    text = out.getvalue()
    assert "bold" in text and "**bold**" not in text and "`code`" not in text


def test_a_long_answer_is_parsed_as_markdown_per_refresh_not_per_delta() -> None:
    # Before: every delta parsed the whole answer again (quadratic: a minute of CPU for a
    # 16 KB answer streamed in 4,000 deltas, with the event loop blocked).
    terminal, out = console(True)
    display = TurnDisplay(terminal)
    text = " ".join(f"**w{i}**" for i in range(3000))
    answer(display, text)
    assert display.markdown_parses < 3000 // 4
    assert "w2999" in out.getvalue() and "**w2999**" not in out.getvalue()


@pytest.mark.parametrize(("terminal", "markdown"), [(False, None), (True, False)])
def test_piped_or_plain_output_is_the_text_as_written(
    terminal: bool, markdown: bool | None
) -> None:
    target, out = console(terminal)
    answer(TurnDisplay(target, markdown=markdown), "Use **bold** and [red]x[/red] :x:")
    assert "Use **bold** and [red]x[/red] :x:" in out.getvalue()


def test_the_spinner_runs_from_the_request_to_the_first_words_only_on_a_terminal() -> None:
    terminal, _ = console(True)
    display = TurnDisplay(terminal)
    display(ModelRequestSent(dispatch=1, request=ModelRequest(messages=[])))
    assert display.spinning
    display(TextDeltaReceived(dispatch=1, text="Hi"))
    assert not display.spinning
    display.finish()
    piped, _ = console(False)
    quiet = TurnDisplay(piped)
    quiet(ModelRequestSent(dispatch=1, request=ModelRequest(messages=[])))
    assert not quiet.spinning


def test_tokens_after_the_turn_and_cost_only_with_a_price() -> None:
    piped, out = console(False)
    answer(TurnDisplay(piped), "ok")
    assert "in 1,234 · out 56 · cached 1,000 (81%)" in out.getvalue()
    assert "$" not in out.getvalue()
    price = Price(input=1.0, output=2.0, cache_read=0.1)
    # (234 fresh * 1 + 1000 cached * 0.1 + 56 * 2) per million = $0.000446; uncached $0.001346
    assert (
        usage_line(Usage(1234, 56, 1000), price)
        == "in 1,234 · out 56 · cached 1,000 (81%) · $0.0004 (saved $0.0009)"
    )
    assert usage_line(Usage(10, 2), Price(1e6, 1e6)).endswith("$12.00")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (429, "rate limited"),
        (529, "server overloaded"),
        (500, "server error 500"),
        (None, "connection failed"),
    ],
)
def test_retry_line_says_why_how_long_and_which_retry(status: int | None, reason: str) -> None:
    notice = RetryNotice(ProviderError("x", status=status), delay=1.04, retry=2, max_retries=4)
    assert retry_line(notice) == f"{reason}, retrying in 1.0 s (2/4)"


def test_a_retry_line_interrupts_the_spinner_which_then_resumes() -> None:
    terminal, out = console(True)
    display = TurnDisplay(terminal)
    display(ModelRequestSent(dispatch=1, request=ModelRequest(messages=[])))
    display.retry(RetryNotice(ProviderError("x", status=429), delay=0.5, retry=1, max_retries=3))
    assert display.spinning
    display.finish()
    assert not display.spinning
    assert "rate limited, retrying in 0.5 s (1/3)" in out.getvalue()
