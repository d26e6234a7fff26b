"""Token estimates, the pluggable counter, and anchored accounting."""

from __future__ import annotations

import builtins
import sys
from typing import Any

import pytest

from plait import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from plait.context import (
    CHARS_PER_TOKEN,
    CharEstimator,
    TiktokenCounter,
    TokenAccountant,
    TokenCounter,
    TokenizerUnavailable,
)
from plait.errors import ConfigurationError
from plait.tokens import MESSAGE_OVERHEAD_TOKENS, message_tokens, tool_tokens


class CountingCounter:
    """A TokenCounter that records how many texts it counted."""

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text.split())


def test_chars_per_token_is_four_and_rounds_up() -> None:
    assert CHARS_PER_TOKEN == 4
    est = CharEstimator()
    assert [est.count("x" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    with pytest.raises(ConfigurationError):
        CharEstimator(0)


def test_counters_satisfy_the_protocol() -> None:
    assert isinstance(CharEstimator(), TokenCounter)
    assert isinstance(CountingCounter(), TokenCounter)


def test_tiktoken_missing_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_tiktoken(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "tiktoken":
            raise ImportError("No module named 'tiktoken'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "tiktoken", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_tiktoken)
    with pytest.raises(TokenizerUnavailable, match=r"plait\[tiktoken\]"):
        TiktokenCounter()


def test_plait_does_not_import_a_tokenizer() -> None:
    import plait.context  # noqa: F401

    assert "tiktoken" not in sys.modules


def test_message_and_tool_estimates_include_calls_args_and_schema() -> None:
    plain = AssistantMessage("hello")
    calling = AssistantMessage("hello", tool_calls=[ToolCall("c1", "search", {"q": "x" * 400})])
    assert message_tokens(calling) > message_tokens(plain) + 100
    result = ToolMessage("c1", "search", {"rows": ["y" * 40] * 10})
    assert message_tokens(result) >= 400 // CHARS_PER_TOKEN
    small = ToolDefinition("t", "d", {"type": "object"})
    big = ToolDefinition("t", "d" * 400, {"type": "object"})
    assert 99 <= tool_tokens(big) - tool_tokens(small) <= 100
    assert message_tokens(UserMessage("")) == MESSAGE_OVERHEAD_TOKENS


def test_request_estimate_counts_system_prompt_tools_and_messages() -> None:
    acc = TokenAccountant()
    msgs = [UserMessage("x" * 400)]
    tools = [ToolDefinition("t", "d" * 400, {"type": "object"})]
    base = acc.request(msgs)
    acc.reset()
    assert acc.request(msgs, system_prompt="s" * 400, tools=tools) >= base + 200


def test_provider_usage_anchors_the_estimate() -> None:
    acc = TokenAccountant()
    msgs: list[Message] = [
        UserMessage("x" * 10_000),
        AssistantMessage("ok", usage=Usage(input_tokens=7_000)),
        UserMessage("y" * 40),
    ]
    expected = 7_000 + message_tokens(msgs[1]) + message_tokens(msgs[2])
    assert acc.request(msgs) == expected
    # Usage before anchor_from is not trusted: full count instead.
    acc.reset()
    assert acc.request(msgs, anchor_from=2) == sum(message_tokens(m) for m in msgs)


def test_accounting_cost_does_not_grow_with_history() -> None:
    counter = CountingCounter()
    acc = TokenAccountant(counter)
    history = [UserMessage(f"m {i}") for i in range(2_000)]
    acc.request(history)
    first = counter.calls
    assert first >= 2_000
    for extra in range(5):
        history.append(UserMessage(f"new {extra}"))
        before = counter.calls
        acc.request(history)
        assert counter.calls - before <= 2  # only the new message (checkpoint reuse)


def test_checkpoint_is_not_reused_for_a_different_list() -> None:
    acc = TokenAccountant()
    shared = UserMessage("z" * 40)
    a = [UserMessage("a" * 4000), shared]
    b = [UserMessage("b" * 40), shared]
    assert acc.request(a) > acc.request(b)


# --- Images, files and reasoning: the providers' formulas, not the length of the bytes ---------


@pytest.mark.parametrize(
    ("size", "anthropic", "openai_high"),
    [
        ((200, 200), 54, 255),  # Anthropic's table: 200 x 200 is about 54 tokens
        ((1000, 1000), 1334, 765),  # Anthropic's table: 1000 x 1000 is about 1,334
        ((1092, 1092), 1590, 765),  # the largest square Anthropic sends unscaled
        ((1024, 1024), 1399, 765),  # OpenAI's guide: 1024 x 1024 high detail is 765
        # OpenAI's guide: 2048 x 4096 -> 768 x 1536, 6 tiles; Anthropic: at most ~1.19 MP
        ((2048, 4096), 1590, 1105),
        ((4000, 1000), 1568 * 392 // 750 + 1, 85 + 170 * 4),  # 1568 x 392; 2048 x 512
        ((8000, 8000), 1590, 765),
    ],
)
def test_image_tokens_follow_each_providers_formula(
    size: tuple[int, int], anthropic: int, openai_high: int
) -> None:
    from plait.tokens import image_tokens

    assert image_tokens(*size, provider="anthropic") == anthropic
    assert image_tokens(*size, provider="openai", detail="high") == openai_high
    assert image_tokens(*size, provider="openai-responses") == openai_high
    assert image_tokens(*size, provider="openai", detail="low") == 85
    assert image_tokens(*size) == max(anthropic, openai_high)


def test_a_message_counts_its_images_by_their_pixels_not_their_bytes() -> None:
    from images import jpeg, png

    from plait.messages import Blob, ImagePart, TextPart
    from plait.tokens import UNKNOWN_IMAGE_TOKENS, image_tokens, part_tokens

    small_but_heavy = ImagePart(Blob(png(100, 100, seed=7) + bytes(1_000_000)))
    assert part_tokens(small_but_heavy, provider="anthropic") == 14  # ceil(10,000 / 750)
    big = ImagePart(Blob(jpeg(1000, 1000)))
    text = message_tokens(UserMessage("look"))
    with_images = UserMessage([TextPart("look"), big, small_but_heavy])
    assert message_tokens(with_images, provider="anthropic") == text + 1334 + 14
    assert message_tokens(with_images) == text + image_tokens(1000, 1000) + image_tokens(100, 100)
    url = ImagePart("https://example.com/cat.png")
    assert part_tokens(url) == UNKNOWN_IMAGE_TOKENS
    low = ImagePart("https://example.com/cat.png", detail="low")
    assert part_tokens(low, provider="openai") == 85
    shot = ToolMessage("c1", "screenshot", "taken", parts=[big])
    assert (
        message_tokens(shot, provider="anthropic")
        == message_tokens(ToolMessage("c1", "screenshot", "taken")) + 1334
    )


def test_files_count_by_pages_or_text_and_reasoning_by_text_and_payload() -> None:
    from plait.messages import Blob, FilePart, ReasoningPart
    from plait.tokens import PDF_PAGE_TOKENS, UNKNOWN_FILE_TOKENS, part_tokens

    pages = b"".join(b"<</Type /Page>>\n" for _ in range(3))
    pdf = FilePart(Blob(b"%PDF-1.4\n" + pages + bytes(500_000)), filename="r.pdf")
    assert part_tokens(pdf) == 3 * PDF_PAGE_TOKENS
    notes = FilePart(Blob(b"x" * 400), "text/plain", "notes.txt")
    assert part_tokens(notes) == 100
    assert part_tokens(FilePart("https://example.com/a.pdf", "application/pdf")) == (
        UNKNOWN_FILE_TOKENS
    )
    assert part_tokens(FilePart(Blob(b"RIFF...."), "audio/wav")) == UNKNOWN_FILE_TOKENS
    signature = "A" * 400
    thinking = ReasoningPart(
        "anthropic", "x" * 80, {"type": "thinking", "thinking": "x" * 80, "signature": signature}
    )
    assert part_tokens(thinking) == 20 + 75  # text, plus 300 signature bytes at 4 a token
    encrypted = ReasoningPart(
        "openai-responses", "", {"type": "reasoning", "id": "rs_1", "encrypted_content": "B" * 16}
    )
    assert part_tokens(encrypted) == 3
    reply = AssistantMessage([thinking])
    assert message_tokens(reply) == MESSAGE_OVERHEAD_TOKENS + 95
