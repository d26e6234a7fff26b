"""Token estimates without a tokenizer, an exact counter when you want one, and accounting that
costs O(new messages) per model call.

* :data:`CHARS_PER_TOKEN` (4) is the seed's estimate: ``ceil(len(text) / 4)`` tokens. It is
  only a starting point: log- and CSV-like text runs nearer 2 characters per token with a BPE
  tokenizer. Once a provider reports ``usage.input_tokens`` for a thread,
  :func:`measure_chars_per_token` records that thread's measured ratio in its state and
  :func:`thread_counter` estimates with it (unless an exact counter was configured).
* :class:`TokenCounter` is the protocol for counting one text; :class:`CharEstimator` is the
  default, :class:`TiktokenCounter` the exact one (``pip install 'plait[tiktoken]'``).
* :func:`message_tokens` / :func:`tool_tokens` estimate one message / tool schema, including a
  small per-item overhead (role markers and separators a provider bills for). Images, files and
  reasoning count by :func:`part_tokens`, never by the length of their bytes or base64:

  - an image by its provider's published formula (:func:`image_tokens`) on the width and height
    read from its header (:attr:`plait.parts.Blob.image_size`, parsed once per blob). Anthropic:
    ``ceil(w * h / 750)`` after scaling to fit 1568 px on the long edge and about 1.15-1.19
    megapixels (1092 x 1092, the largest square its table lists unscaled: 1,590 tokens).
    OpenAI: ``detail="low"`` is 85; otherwise scale to fit 2048 x 2048, then the shortest side
    to 768, and count ``85 + 170`` per 512 px tile. Without a provider (the default) the larger
    of the two; a URL image, or bytes whose size cannot be read, is
    :data:`UNKNOWN_IMAGE_TOKENS`;
  - a PDF as :data:`PDF_PAGE_TOKENS` per page (Anthropic's guide: 1,500-3,000 text tokens a
    page, plus each page as an image), a ``text/*`` file as its text, any other file (audio)
    or a file URL as :data:`UNKNOWN_FILE_TOKENS`;
  - a reasoning part as its text plus its opaque payload (``signature``, ``data``,
    ``encrypted_content``: base64 of about as many bytes as the reasoning it stands for, so
    ``len * 3 / 4`` bytes at :data:`CHARS_PER_TOKEN`).
* :class:`TokenAccountant` estimates a whole request. It walks back from the newest message and
  stops at the first *anchor*: the last assistant message whose provider reported
  ``usage.input_tokens`` (the size of the request that produced it, system prompt and tools
  included), or a checkpoint it left itself on an earlier call over the same list. Only the
  messages after the anchor are counted, so the cost per call does not grow with the history.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from plait.errors import ConfigurationError
from plait.messages import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolDefinition,
    ToolMessage,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "CHARS_PER_TOKEN_STATE_KEY",
    "MESSAGE_OVERHEAD_TOKENS",
    "PDF_PAGE_TOKENS",
    "UNKNOWN_FILE_TOKENS",
    "UNKNOWN_IMAGE_TOKENS",
    "CharEstimator",
    "PrefixTotals",
    "TiktokenCounter",
    "TokenAccountant",
    "TokenCounter",
    "TokenizerUnavailable",
    "image_tokens",
    "measure_chars_per_token",
    "message_text",
    "message_tokens",
    "part_tokens",
    "record_chars_per_token",
    "thread_counter",
    "tool_tokens",
]

CHARS_PER_TOKEN: Final = 4
"""Characters per token for every estimate (the seed's value)."""

MESSAGE_OVERHEAD_TOKENS: Final = 4
"""Tokens added per message or tool schema for role markers and separators."""

UNKNOWN_IMAGE_TOKENS: Final = 1_600
"""Tokens of an image whose size is unknown (a URL, an unreadable header): about the most an
Anthropic image costs (1092 x 1092 is 1,590) and more than a 1024 x 1024 OpenAI
image (765)."""

PDF_PAGE_TOKENS: Final = 3_000
"""Tokens per PDF page: Anthropic's guide gives 1,500-3,000 text tokens a page, and each page is
also sent as an image (about 1,500 more); 1,500 + 1,500."""

UNKNOWN_FILE_TOKENS: Final = 5 * PDF_PAGE_TOKENS
"""Tokens of a file whose size is unknown (a URL) or not text (audio): five PDF pages."""

ANTHROPIC_MAX_EDGE: Final = 1568
ANTHROPIC_MAX_PIXELS: Final = 1_192_464  # 1092 x 1092, the largest square sent unscaled
ANTHROPIC_PIXELS_PER_TOKEN: Final = 750
OPENAI_LOW_DETAIL_TOKENS: Final = 85
OPENAI_TILE_TOKENS: Final = 170

CHARS_PER_TOKEN_STATE_KEY: Final = "plait.tokens.chars_per_token"
"""Thread-state key of the thread's measured characters per token (a float)."""

MEASURED_RATIO_RANGE: Final = (1.0, 8.0)
"""Measured ratios are clamped to this range (a provider's usage can include hidden tokens)."""

MIN_MEASURED_TOKENS: Final = 256
"""Smaller requests are not measured: their overheads swamp the content."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of one text."""

    def count(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class CharEstimator:
    """``ceil(len(text) / chars_per_token)``: O(1) per text, no dependency. ``chars_per_token``
    may be fractional (a measured ratio such as 1.9) and must be at least 1."""

    chars_per_token: float = CHARS_PER_TOKEN

    def __post_init__(self) -> None:
        if not self.chars_per_token >= 1:
            raise ConfigurationError("chars_per_token must be at least 1.")

    def count(self, text: str) -> int:
        return int(-(-len(text) // self.chars_per_token))


DEFAULT_COUNTER: Final = CharEstimator()


class TokenizerUnavailable(ConfigurationError):
    """An exact token counter was requested but its tokenizer package is not installed."""


class TiktokenCounter:
    """Exact counts with OpenAI's ``tiktoken`` (the optional ``plait[tiktoken]`` extra).

    The package is imported when the counter is created, not when plait is imported. Note that
    ``tiktoken`` downloads its encoding files on first use unless they are cached.
    """

    def __init__(self, encoding: str = "cl100k_base") -> None:
        try:
            tiktoken = importlib.import_module("tiktoken")
        except ImportError as exc:
            raise TokenizerUnavailable(
                "TiktokenCounter needs the 'tiktoken' package. Install it with "
                "\"pip install 'plait[tiktoken]'\", or use CharEstimator (the default), which "
                "needs no tokenizer."
            ) from exc
        self.encoding = encoding
        self._encoding: Any = tiktoken.get_encoding(encoding)

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def message_text(message: Message) -> str:
    """The text a provider would be sent for ``message`` (tool calls as ``name`` + JSON args)."""
    if isinstance(message, ToolMessage):
        data = message.data
        return data if isinstance(data, str) else _json(data)
    text = message.text
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = [
            f"{c.id} {c.name} {c.raw_args if c.raw_args is not None else _json(c.args)}"
            for c in message.tool_calls
        ]
        text = "\n".join([text, *calls]) if text else "\n".join(calls)
    return text


def message_tokens(
    message: Message, counter: TokenCounter = DEFAULT_COUNTER, *, provider: str | None = None
) -> int:
    """Estimated tokens of one message, overhead included; images, files and reasoning by
    :func:`part_tokens` for ``provider`` (``"anthropic"``, ``"openai…"``; ``None``: the larger
    estimate)."""
    extra = 0
    if isinstance(message, ToolMessage):
        extra = counter.count(message.name) + counter.count(message.tool_call_id)
        parts = message.parts
    else:
        parts = message.content
    for part in parts:
        if type(part) is not TextPart:  # text parts are in message_text
            extra += part_tokens(part, counter, provider=provider)
    return counter.count(message_text(message)) + extra + MESSAGE_OVERHEAD_TOKENS


def part_tokens(
    part: Part, counter: TokenCounter = DEFAULT_COUNTER, *, provider: str | None = None
) -> int:
    """Estimated tokens of one content part (see the module docstring)."""
    if isinstance(part, ImagePart):
        blob = part.blob
        size = None if blob is None else blob.image_size
        if size is None:
            low = part.detail == "low" and provider is not None and provider.startswith("openai")
            return OPENAI_LOW_DETAIL_TOKENS if low else UNKNOWN_IMAGE_TOKENS
        return image_tokens(*size, provider=provider, detail=part.detail)
    if isinstance(part, FilePart):
        blob = part.blob
        if blob is None:
            return UNKNOWN_FILE_TOKENS
        if part.media_type == "application/pdf":
            return blob.page_count * PDF_PAGE_TOKENS
        if part.media_type.startswith("text/"):
            return int(-(-blob.size // CHARS_PER_TOKEN))
        return UNKNOWN_FILE_TOKENS
    if isinstance(part, ReasoningPart):
        payload = part.payload
        opaque = 0
        for key in ("signature", "data", "encrypted_content"):
            value = payload.get(key) if isinstance(payload, dict) else None
            if isinstance(value, str):
                opaque += len(value)
        return counter.count(part.text) + -(-(opaque * 3 // 4) // CHARS_PER_TOKEN)
    if isinstance(part, TextPart):
        return counter.count(part.text)
    return 0


def image_tokens(
    width: int, height: int, *, provider: str | None = None, detail: str | None = None
) -> int:
    """Tokens a provider bills for a ``width`` x ``height`` image (formulas in the module
    docstring); ``provider=None`` gives the larger of Anthropic's and OpenAI's."""
    if provider is None:
        return max(_anthropic_image(width, height), _openai_image(width, height, detail))
    if provider.startswith("openai"):
        return _openai_image(width, height, detail)
    return _anthropic_image(width, height)


def _anthropic_image(width: int, height: int) -> int:
    scale = min(
        1.0,
        ANTHROPIC_MAX_EDGE / max(width, height),
        math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)),
    )
    w, h = max(1, int(width * scale)), max(1, int(height * scale))
    return -(-(w * h) // ANTHROPIC_PIXELS_PER_TOKEN)


def _openai_image(width: int, height: int, detail: str | None) -> int:
    if detail == "low":
        return OPENAI_LOW_DETAIL_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    tiles = math.ceil(int(w) / 512) * math.ceil(int(h) / 512)
    return OPENAI_LOW_DETAIL_TOKENS + OPENAI_TILE_TOKENS * max(1, tiles)


def tool_tokens(definition: ToolDefinition, counter: TokenCounter = DEFAULT_COUNTER) -> int:
    """Estimated tokens of one advertised tool: name, description and JSON schema."""
    text = f"{definition.name}\n{definition.description}\n{_json(definition.parameters)}"
    return counter.count(text) + MESSAGE_OVERHEAD_TOKENS


@dataclass(slots=True)
class _Checkpoint:
    first: Message
    index: int
    last: Message
    total: int


class PrefixTotals:
    """A sum over a list of messages that grows, in O(messages new since the last call).

    It keeps up to ``max_checkpoints`` checkpoints: the total through message ``i`` of a list
    it summed, valid while the list's first message and message ``i`` are the same objects at
    the same positions. :meth:`sum` walks back from the end to the newest valid checkpoint, so a
    request that grew by a few messages costs a few ``cost`` calls, not one per message.
    Replacing a message in the middle of a list needs :meth:`clear` (identity of the ends
    cannot see it).
    """

    def __init__(self, max_checkpoints: int = 16) -> None:
        self._max = max_checkpoints
        self._checkpoints: dict[str, _Checkpoint] = {}

    def clear(self) -> None:
        self._checkpoints.clear()

    def sum(
        self,
        messages: Sequence[Message],
        cost: Callable[[Message], int],
        *,
        anchor: Callable[[int, Message], int] | None = None,
        base: Callable[[], int] | None = None,
    ) -> int:
        """The sum of ``cost`` over ``messages``; leaves a checkpoint at the end.

        ``anchor(i, message)``, when given, may return a known total of everything before
        message ``i`` (a provider's reported input tokens; 0 for none): the walk stops there.
        ``base()`` is added when neither a checkpoint nor an anchor was found (what every
        request carries besides its messages, e.g. the system prompt).
        """
        delta = 0
        total: int | None = None
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            cp = self._checkpoints.get(m.id)
            if cp is not None and cp.index == i and cp.last is m and cp.first is messages[0]:
                total = cp.total + delta
                break
            delta += cost(m)
            if anchor is not None:
                known = anchor(i, m)
                if known > 0:
                    total = known + delta
                    break
        if total is None:
            total = delta if base is None else delta + base()
        if messages:
            last = messages[-1]
            if len(self._checkpoints) >= self._max and last.id not in self._checkpoints:
                self._checkpoints.pop(next(iter(self._checkpoints)))
            self._checkpoints[last.id] = _Checkpoint(messages[0], len(messages) - 1, last, total)
        return total


class TokenAccountant:
    """Estimates request sizes, reusing provider usage and its own earlier work.

    One accountant per middleware instance. It keeps a few checkpoints (:class:`PrefixTotals`:
    total tokens through message ``i`` of a list it saw) and a cache of tool-schema estimates.
    :meth:`reset` drops both, for when messages in the middle of a list were replaced.
    """

    def __init__(self, counter: TokenCounter | None = None, *, max_checkpoints: int = 16) -> None:
        self.counter: TokenCounter = counter or DEFAULT_COUNTER
        self._totals = PrefixTotals(max_checkpoints)
        self._tools: dict[int, tuple[ToolDefinition, int]] = {}

    def reset(self) -> None:
        self._totals.clear()
        self._tools.clear()

    def message(self, message: Message) -> int:
        return message_tokens(message, self.counter)

    def messages(self, messages: Iterable[Message]) -> int:
        """Full count of ``messages`` (no anchors): O(len)."""
        return sum(message_tokens(m, self.counter) for m in messages)

    def tools(self, definitions: Sequence[ToolDefinition]) -> int:
        total = 0
        for d in definitions:
            cached = self._tools.get(id(d))
            if cached is None or cached[0] is not d:
                if len(self._tools) > 1024:
                    self._tools.clear()
                cached = (d, tool_tokens(d, self.counter))
                self._tools[id(d)] = cached
            total += cached[1]
        return total

    def request(
        self,
        messages: Sequence[Message],
        *,
        system_prompt: str = "",
        tools: Sequence[ToolDefinition] = (),
        anchor_from: int = 0,
    ) -> int:
        """Estimated input tokens of a request with these parts.

        Provider-reported usage on assistant messages at index ``>= anchor_from`` is trusted as
        the size of everything before them; pass ``anchor_from=len(messages)`` to ignore it (for
        instance when the earlier requests were shaped differently). Leaves a checkpoint at the
        end of ``messages`` so the next call over the same list, grown, counts only what is new.
        """
        counter = self.counter

        def reported(i: int, m: Message) -> int:
            if i >= anchor_from and isinstance(m, AssistantMessage) and m.usage is not None:
                return m.usage.input_tokens
            return 0

        return self._totals.sum(
            messages,
            lambda m: message_tokens(m, counter),
            anchor=reported if anchor_from < len(messages) else None,
            base=lambda: counter.count(system_prompt) + self.tools(tools),
        )


def measure_chars_per_token(
    state: dict[str, Any],
    *,
    messages: Sequence[Message],
    system_prompt: str,
    tools: Sequence[ToolDefinition],
    input_tokens: int,
) -> float | None:
    """Record in ``state`` the characters per token of a request a provider reported
    ``input_tokens`` for, and return it (see :func:`record_chars_per_token`). Cost:
    O(len(messages)); :class:`plait.context.ratio.RatioMeter` does it incrementally."""
    return record_chars_per_token(
        state,
        message_chars=sum(len(message_text(m)) for m in messages),
        messages=len(messages),
        system_prompt=system_prompt,
        tools=tools,
        input_tokens=input_tokens,
    )


def record_chars_per_token(
    state: dict[str, Any],
    *,
    message_chars: int,
    messages: int,
    system_prompt: str,
    tools: Sequence[ToolDefinition],
    input_tokens: int,
) -> float | None:
    """Record the ratio of a request of ``messages`` messages holding ``message_chars``
    characters; ``None`` (nothing recorded) under :data:`MIN_MEASURED_TOKENS`. The per-item
    overheads are taken off first, so estimating the same request again with the ratio gives
    back about ``input_tokens``; the ratio is clamped to :data:`MEASURED_RATIO_RANGE`."""
    if input_tokens < MIN_MEASURED_TOKENS:
        return None
    chars = message_chars + len(system_prompt)
    chars += sum(len(t.name) + len(t.description) + len(_json(t.parameters)) for t in tools)
    content_tokens = max(1, input_tokens - MESSAGE_OVERHEAD_TOKENS * (messages + len(tools)))
    low, high = MEASURED_RATIO_RANGE
    ratio = round(min(high, max(low, chars / content_tokens)), 3)
    state[CHARS_PER_TOKEN_STATE_KEY] = ratio
    return ratio


def thread_counter(state: dict[str, Any], configured: TokenCounter | None) -> TokenCounter:
    """The counter to estimate a thread's text with: ``configured`` if the application chose
    one (an exact tokenizer, a fixed ratio), else a :class:`CharEstimator` at the thread's
    measured ratio (see :func:`measure_chars_per_token`), else :data:`DEFAULT_COUNTER`."""
    if configured is not None:
        return configured
    ratio = state.get(CHARS_PER_TOKEN_STATE_KEY)
    if not isinstance(ratio, int | float) or isinstance(ratio, bool):
        return DEFAULT_COUNTER
    low, high = MEASURED_RATIO_RANGE
    # Tenths: a ratio re-measured every call then rarely changes the estimator, so estimates
    # keep their checkpoints.
    return _estimator(round(min(high, max(low, float(ratio))), 1))


@functools.lru_cache(maxsize=256)
def _estimator(ratio: float) -> CharEstimator:
    return CharEstimator(ratio)
