"""``FunctionTool.validate`` reuses its last flat validation only when that cannot change a
result: the same outputs as validating afresh, for any sequence of arguments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.errors import ToolArgumentsError
from plait.tools import FunctionTool


def target(x: Any, y: int | float | bool = 0, z: str | None = None) -> None:
    """Arguments whose validated values depend on the input's exact type."""


def outcome(tool: FunctionTool, args: dict[str, Any]) -> object:
    try:
        value = tool.validate(args)
    except ToolArgumentsError as exc:
        return ("error", str(exc))
    return {k: (type(v), v) for k, v in value.items()}


flat = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 1.0, True, "1", "x", 2.5]),
    st.lists(st.integers(0, 2), max_size=2),
)
arguments = st.dictionaries(st.sampled_from(["x", "y", "z", "w"]), flat, max_size=4)


@settings(max_examples=300, deadline=None)
@given(sequence=st.lists(arguments, min_size=1, max_size=6))
def test_reused_validation_equals_a_fresh_one(sequence: list[dict[str, Any]]) -> None:
    remembered = FunctionTool(target)
    for args in sequence:
        assert outcome(remembered, args) == outcome(FunctionTool(target), args)


def test_each_caller_gets_its_own_dict() -> None:
    tool = FunctionTool(target)
    first = tool.validate({"x": "a", "y": 2})
    first["y"] = 99
    again = tool.validate({"x": "a", "y": 2})
    assert again == {"x": "a", "y": 2, "z": None}
    assert again is not first


def test_an_invalid_call_is_never_answered_from_memory() -> None:
    tool = FunctionTool(target)
    tool.validate({"x": 1, "y": 2})
    with pytest.raises(ToolArgumentsError):
        tool.validate({"x": 1, "y": "not a number"})
