"""Summarizers: turn older messages (and the previous summary) into one bounded summary text.

A :class:`Summarizer` *folds*: it receives the previous summary and only the messages added
since, never the whole history again.

* :class:`ExtractiveSummarizer` (the default): no model call, deterministic, O(budget). One
  line per message (role, clipped text, tool calls and results), the first line of the thread
  kept as the statement of intent, then the newest lines that fit; a marker counts what was
  dropped in between.
* :class:`ModelSummarizer`: asks a :class:`~plait.models.base.Model` (``call_class=
  "summarizer"``). Its *input* is trimmed to ``max_input_tokens`` as well (head quarter, tail
  three quarters of the transcript), so the summarizer cannot overflow itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

from plait.context.offload import head_tail, is_offloaded
from plait.errors import ConfigurationError, PlaitError
from plait.messages import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ToolMessage,
    UserMessage,
)
from plait.models.base import Model, ModelRequest
from plait.parts import part_label
from plait.tokens import CHARS_PER_TOKEN, DEFAULT_COUNTER, TokenCounter, message_text

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "ExtractiveSummarizer",
    "ModelSummarizer",
    "Summarizer",
    "SummarizerError",
    "render_entry",
]

_OMITTED = re.compile(r"^- \.\.\. \[(\d+) earlier entries omitted\] \.\.\.$")


class SummarizerError(PlaitError):
    """A summarizer produced no usable summary."""


@runtime_checkable
class Summarizer(Protocol):
    """Folds ``messages`` into ``previous`` (``None`` on the first pass) within ``max_tokens``."""

    @property
    def name(self) -> str: ...

    async def summarize(
        self, previous: str | None, messages: Sequence[Message], *, max_tokens: int
    ) -> str: ...


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text[: limit * 2].split())
    if len(flat) <= limit and len(text) <= limit * 2:
        return flat
    return flat[:limit] + "…"


def render_entry(message: Message, line_chars: int = 200) -> str:
    """One summary line for ``message``: ``- role: text``, tool calls and results abbreviated."""
    if isinstance(message, ToolMessage):
        data = message.data
        status = " (error)" if message.is_error else ""
        if is_offloaded(data) and "full_result_path" in data:
            path, tokens = data["full_result_path"], data.get("estimated_tokens", "?")
            return f"- {message.name} result{status}: evicted to {path} ({tokens} tokens)"
        attached = "".join(
            f" {part_label(p)}" for p in message.parts if not isinstance(p, TextPart)
        )
        text = _clip(message_text(message), line_chars)
        return f"- {message.name} result{status}: {text}{attached}"
    parts = [_clip(message.text, line_chars)] if message.text else []
    # Images and files leave the request with the messages a summary folds: a line names each
    # (type, size, address), so the model knows what it saw. Reasoning is not carried over.
    parts.extend(part_label(p) for p in message.content if isinstance(p, ImagePart | FilePart))
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = [
            f"{c.name}({_clip(c.raw_args or _args_text(c.args), 80)})"
            for c in message.tool_calls[:3]
        ]
        more = len(message.tool_calls) - 3
        parts.append(f"[called {', '.join(calls)}{f' +{more} more' if more > 0 else ''}]")
    return f"- {message.role}: {' '.join(parts)}"


def _args_text(args: dict[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def _parse(previous: str | None, line_chars: int) -> tuple[list[str], int]:
    """The entries and omitted count of an extractive summary; a free-text summary (from a
    model) becomes one entry, so the extractive fallback can still fold it."""
    entries: list[str] = []
    omitted = 0
    for line in (previous or "").splitlines():
        match = _OMITTED.match(line)
        if match:
            omitted += int(match.group(1))
        elif line.startswith("- "):
            entries.append(line)
    if previous and previous.strip() and not entries:
        entries = [f"- earlier summary: {_clip(previous, line_chars * 4)}"]
    return entries, omitted


class ExtractiveSummarizer:
    """The default summarizer: one clipped line per message, no model call.

    Folding keeps the first entry ever made, then the newest entries that fit ``max_tokens``,
    and counts the rest in a ``- ... [N earlier entries omitted] ...`` line.
    """

    def __init__(self, *, line_chars: int = 200, counter: TokenCounter | None = None) -> None:
        self.line_chars = line_chars
        self.counter: TokenCounter = counter or DEFAULT_COUNTER

    @property
    def name(self) -> str:
        return "extractive"

    async def summarize(
        self, previous: str | None, messages: Sequence[Message], *, max_tokens: int
    ) -> str:
        return self.fold(previous, messages, max_tokens=max_tokens)

    def fold(self, previous: str | None, messages: Sequence[Message], *, max_tokens: int) -> str:
        """The synchronous body of :meth:`summarize`."""
        old, omitted = _parse(previous, self.line_chars)
        if old:
            first, older, new = old[0], old[1:], messages
        elif messages:
            first, older, new = render_entry(messages[0], self.line_chars), [], messages[1:]
        else:
            return ""
        used = self.counter.count(first) + 16
        chosen: list[str] = []
        for entry in self._newest_first(older, new):
            cost = self.counter.count(entry) + 1
            if used + cost > max_tokens:
                break
            chosen.append(entry)
            used += cost
        omitted += len(older) + len(new) - len(chosen)
        marker = [f"- ... [{omitted} earlier entries omitted] ..."] if omitted else []
        return "\n".join([first, *marker, *reversed(chosen)])

    def _newest_first(self, older: list[str], new: Sequence[Message]) -> Iterator[str]:
        for i in range(len(new) - 1, -1, -1):
            yield render_entry(new[i], self.line_chars)
        yield from reversed(older)


DEFAULT_SUMMARY_PROMPT = """\
Condense the conversation below into a summary that lets an assistant continue the work without \
the original messages. Keep the user's goals and constraints, decisions made, facts learned from \
tools (names, paths, numbers, identifiers), artifacts touched, and what remains to be done. \
Write plain text of at most {max_tokens} tokens.

{previous}<messages>
{transcript}
</messages>"""


class ModelSummarizer:
    """Summarizes with ``model`` (a request with ``call_class="summarizer"``).

    The request's input is bounded by ``max_input_tokens``: the previous summary takes at most a
    quarter, the transcript the rest, keeping its first quarter and last three quarters and
    naming how many messages were left out in the middle.

    ``prompt`` is a :meth:`str.format` template with the placeholders ``{max_tokens}``,
    ``{previous}`` and ``{transcript}`` (any other, a literal brace not doubled included, is a
    :class:`~plait.errors.ConfigurationError` here, not a failure on every pass). A summary
    longer than twice ``max_tokens`` worth of characters (a model that ignores ``max_tokens``)
    keeps its start and end.
    """

    def __init__(
        self,
        model: Model,
        *,
        max_input_tokens: int = 4000,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        line_chars: int = 1000,
    ) -> None:
        try:
            prompt.format(max_tokens=0, previous="", transcript="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigurationError(
                f"The summary prompt cannot be filled in ({type(exc).__name__}: {exc}): it may "
                "use only the placeholders {max_tokens}, {previous}, {transcript}; double any "
                "literal brace ({{ and }})."
            ) from None
        self.model = model
        self.max_input_tokens = max_input_tokens
        self.prompt = prompt
        self.line_chars = line_chars

    @property
    def name(self) -> str:
        return f"model:{self.model.name}"

    def build_request(
        self, previous: str | None, messages: Sequence[Message], *, max_tokens: int
    ) -> ModelRequest:
        budget = self.max_input_tokens * CHARS_PER_TOKEN - len(self.prompt)
        prior = ""
        if previous:
            kept = head_tail(previous, budget // 4)
            prior = f"Summary of the conversation before these messages:\n{kept}\n\n"
        transcript = self._transcript(messages, max(0, budget - len(prior)))
        text = self.prompt.format(max_tokens=max_tokens, previous=prior, transcript=transcript)
        return ModelRequest(
            messages=[UserMessage(text)], max_tokens=max_tokens, call_class="summarizer"
        )

    def _transcript(self, messages: Sequence[Message], budget: int) -> str:
        head: list[str] = []
        tail: list[str] = []
        used, i, j = 0, 0, len(messages) - 1
        while i <= j:
            line = render_entry(messages[i], self.line_chars)
            if used + len(line) + 1 > budget // 4:
                break
            head.append(line)
            used, i = used + len(line) + 1, i + 1
        while j >= i:
            line = render_entry(messages[j], self.line_chars)
            if used + len(line) + 1 > budget:
                break
            tail.append(line)
            used, j = used + len(line) + 1, j - 1
        gap = [f"[... {j - i + 1} messages omitted ...]"] if j >= i else []
        return "\n".join([*head, *gap, *reversed(tail)])

    async def summarize(
        self, previous: str | None, messages: Sequence[Message], *, max_tokens: int
    ) -> str:
        response = await self.model.generate(
            self.build_request(previous, messages, max_tokens=max_tokens)
        )
        summary = response.content.strip()
        if not summary:
            raise SummarizerError(f"Summarizer model {self.model.name!r} returned no text.")
        return head_tail(summary, 2 * max_tokens * CHARS_PER_TOKEN)
