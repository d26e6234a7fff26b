"""``dump_messages`` / ``load_messages``: a lossless JSON round trip for every message kind."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    dump_messages,
    load_messages,
)

NESTED: dict[str, Any] = {
    "rows": [[1, 2.5, None], [True, False, "ü"]],
    "deep": {"a": {"b": {"c": [{"d": "🦜"}]}}},
    "empty": {"list": [], "dict": {}, "text": ""},
    "big": 2**70,
    "negative": -1.25e-7,
}


def every_kind() -> list[Message]:
    return [
        SystemMessage("Summary so far: …", metadata={"source": "summary", "covers": [0, 12]}),
        UserMessage(
            [TextPart("naïve café — 東京 "), TextPart("😀\r\n\ttab\x00nul")],
            metadata={"source": "pinned_skill", "skill": {"name": "pdf", "path": "skills/pdf"}},
            id="user-1",
        ),
        AssistantMessage(
            "Let me look.",
            tool_calls=[
                ToolCall("c1", "read_file", {"path": "r.csv", "opts": NESTED}),
                ToolCall("c2", "broken", raw_args='{"path": "unterminated'),
            ],
            usage=Usage(11, 22, cache_read_tokens=3, cache_write_tokens=4, requests=1),
            finish_reason="tool_calls",
            metadata={"model": "scripted"},
        ),
        ToolMessage("c1", "read_file", data=NESTED, metadata={"_evicted": False}),
        ToolMessage("c2", "broken", data="Invalid arguments", is_error=True),
        AssistantMessage(),
    ]


def test_every_message_kind_round_trips_losslessly() -> None:
    original = every_kind()
    restored = load_messages(dump_messages(original))
    assert restored == original
    assert [type(m) for m in restored] == [type(m) for m in original]
    assert [m.id for m in restored] == [m.id for m in original]
    call = restored[2]
    assert isinstance(call, AssistantMessage)
    assert call.tool_calls[1].raw_args == '{"path": "unterminated'
    assert call.tool_calls[1].args == {}
    assert call.usage == Usage(11, 22, 3, 4, 1)
    result = restored[3]
    assert isinstance(result, ToolMessage)
    assert result.data["big"] == 2**70


def test_dump_is_a_json_array_tagged_by_role() -> None:
    data = json.loads(dump_messages(every_kind()))
    assert [item["role"] for item in data] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_loading_twice_gives_independent_objects() -> None:
    text = dump_messages(every_kind())
    first, second = load_messages(text), load_messages(text)
    first[1].metadata["source"] = "changed"
    assert second[1].metadata["source"] == "pinned_skill"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ('[{"role": "user", "content": [{"type": "text"}], "metadata": {}, "id": "u"}]', "text"),
        ('[{"role": "wizard", "content": [], "metadata": {}, "id": "x"}]', "role"),
        (
            '[{"role": "tool", "name": "t", "data": 1, "is_error": false, '
            '"metadata": {}, "id": "t"}]',
            "tool_call_id",
        ),
        (
            '[{"role": "assistant", "content": [], "tool_calls": [{"id": "c", "name": "n", '
            '"args": "not a dict"}], "usage": null, "finish_reason": null, "metadata": {}, '
            '"id": "a"}]',
            "args",
        ),
    ],
)
def test_malformed_message_json_raises_a_value_error_naming_the_field(
    payload: str, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        load_messages(payload)


def test_json_that_does_not_parse_raises_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"(?i)json"):
        load_messages('[{"role": "user",')


# --- property: any message built from JSON values survives the round trip ----------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=4)
ids = st.text(min_size=1, max_size=12)
parts = st.lists(st.builds(TextPart, st.text()), max_size=3)
usages = st.none() | st.builds(
    Usage, *[st.integers(min_value=0, max_value=10**9) for _ in range(5)]
)
tool_calls = st.builds(ToolCall, ids, st.text(min_size=1), json_objects, st.none() | st.text())

messages = st.one_of(
    st.builds(lambda c, m, i: SystemMessage(c, metadata=m, id=i), parts, json_objects, ids),
    st.builds(lambda c, m, i: UserMessage(c, metadata=m, id=i), parts, json_objects, ids),
    st.builds(
        lambda c, t, u, f, m, i: AssistantMessage(
            c, tool_calls=t, usage=u, finish_reason=f, metadata=m, id=i
        ),
        parts,
        st.lists(tool_calls, max_size=3),
        usages,
        st.none() | st.sampled_from(["stop", "tool_calls", "length"]),
        json_objects,
        ids,
    ),
    st.builds(
        lambda c, n, d, e, m, i: ToolMessage(c, n, d, is_error=e, metadata=m, id=i),
        ids,
        st.text(min_size=1),
        json_values,
        st.booleans(),
        json_objects,
        ids,
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=6))
def test_any_message_list_round_trips(original: list[Message]) -> None:
    assert load_messages(dump_messages(original)) == original
