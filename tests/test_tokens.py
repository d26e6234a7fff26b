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
