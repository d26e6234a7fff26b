"""Error messages repeat at most a few hundred characters of what a model or a file sent:
the shared helpers, then one scenario per place that quotes outside input."""

from __future__ import annotations

import pytest

from plait import Agent, ScriptedModel, ToolCall, ToolMessage, tool
from plait.errors import (
    MAX_QUOTED_CHARS,
    ToolArgumentsError,
    ToolExecutionError,
    ToolResolutionError,
    ToolTimeoutError,
    clipped,
    quoted,
)
from plait.paths import PathEscapeError, normalize_virtual_path
from plait.skills.rules import name_problems

HUGE = "x" * 100_000
BOUND = 4 * MAX_QUOTED_CHARS + 400  # the quoted value plus the message's own words


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("short", "'short'"),
        ("a" * MAX_QUOTED_CHARS, repr("a" * MAX_QUOTED_CHARS)),
        ("a" * (MAX_QUOTED_CHARS + 5), repr("a" * MAX_QUOTED_CHARS) + "…(+5 characters)"),
        (12345, "'12345'"),
        ("it's", '"it\'s"'),
    ],
)
def test_quoted_shows_at_most_the_limit(value: object, expected: str) -> None:
    assert quoted(value) == expected


def test_quoted_escapes_only_the_kept_characters() -> None:
    text = "\x00" * 10_000
    shown = quoted(text, 10)
    assert shown == repr("\x00" * 10) + "…(+9990 characters)"
    assert len(quoted(text)) <= 4 * MAX_QUOTED_CHARS + 30


def test_clipped_leaves_short_text_and_counts_the_rest() -> None:
    assert clipped("abc", 3) == "abc"
    assert clipped("abcdef", 3) == "abc…(+3 characters)"
    assert clipped("abcdef", 0) == "a…(+5 characters)"


def test_unknown_tool_name_is_bounded() -> None:
    message = str(ToolResolutionError(HUGE, ["a", "b"]))
    assert len(message) < BOUND
    assert "Available tools: a, b." in message


def test_the_list_of_available_tools_is_bounded() -> None:
    # A registry fed by MCP servers can hold hundreds of tools with long names; the model is
    # told a bounded list (sorted, so the same every time) and how many more there are.
    names = [f"server_{i:03d}_" + "n" * 300 for i in range(500)]
    message = str(ToolResolutionError("nope", names))
    assert "server_000_" in message and "and 450 more" in message
    assert "server_499_" not in message
    assert len(message) < 20_000
    assert ToolResolutionError("nope", names).available == sorted(names)


def test_bad_arguments_are_bounded_in_count_and_length() -> None:
    problems = [f"field{i}: {HUGE}" for i in range(50)]
    message = str(ToolArgumentsError("t", problems))
    assert len(message) < 12 * 2 * MAX_QUOTED_CHARS + 400
    assert "and 40 more problems" in message
    assert len(str(ToolArgumentsError.not_an_object("t", HUGE))) < BOUND


def test_tool_exception_text_is_bounded() -> None:
    message = str(ToolExecutionError("t", ValueError(HUGE)))
    assert len(message) < 1000 + 200
    assert message.startswith("Tool 't' failed: ValueError: xxx")
    assert len(str(ToolExecutionError(HUGE, ValueError("x")))) < BOUND + 100
    assert len(str(ToolTimeoutError(HUGE, 5.0))) < BOUND + 100


def test_paths_and_skill_names_are_bounded() -> None:
    with pytest.raises(PathEscapeError) as escape:
        normalize_virtual_path("../" + HUGE)
    assert len(str(escape.value)) < BOUND
    assert all(len(message) < BOUND for _, message in name_problems(HUGE.upper() + "!", "y" * 5000))


def test_an_agent_turn_with_huge_model_input_reports_bounded_errors() -> None:
    @tool
    def echo(x: int) -> int:
        """Echo a number."""
        return x

    model = ScriptedModel(
        [
            [ToolCall("c1", HUGE, {}), ToolCall("c2", "echo", {"x": HUGE})],
            "done",
        ]
    )
    result = Agent(model, tools=[echo]).run_sync("go")
    errors = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert [m.is_error for m in errors] == [True, True]
    assert all(len(m.text) < BOUND for m in errors)
