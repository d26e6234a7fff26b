"""plait.storable: every value class a store cannot encode becomes one it can, and is reported."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pytest

from plait.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from plait.storable import (
    MAX_DEPTH,
    Replacement,
    storable_message,
    storable_text,
    storable_value,
)
from plait.stores.base import messages_from_json, messages_to_json, state_to_json


def nested(levels: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(levels - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def roundtrip(data: Any) -> Any:
    """Write ``data`` as a tool result through the stores' codec and read it back."""
    rows = messages_to_json("t", [ToolMessage("c", "n", data)])
    back = messages_from_json("t", rows)[0]
    assert isinstance(back, ToolMessage)
    return back.data


@dataclass
class Point:
    x: int


class Opaque:
    def __str__(self) -> str:
        return "opaque!"


# value, what it must become, the problem reported (None: nothing reported)
CASES: list[tuple[str, Any, Any, str | None]] = [
    ("lone high surrogate", "a\ud800b", "a\ufffdb", "lone surrogate U+D800"),
    ("undecodable file name", "r\udcffport.csv", "r\ufffdport.csv", "lone surrogate U+DCFF"),
    ("split surrogate pair", "\ud83d\ude00", "\U0001f600", None),
    ("nan", math.nan, "NaN", "nan"),
    ("inf", math.inf, "Infinity", "inf"),
    ("-inf", -math.inf, "-Infinity", "-inf"),
    ("huge int", 10**5000, hex(10**5000), "int of"),
    ("non-str key", {1: "a"}, {"1": "a"}, "int key -> str"),
    ("surrogate in a key", {"k\ud800": 1}, {"k\ufffd": 1}, "lone surrogate"),
    ("object without JSON form", Opaque(), "opaque!", "Opaque object"),
    ("dataclass", Point(3), {"x": 3}, None),
    ("tuple and set", ((1, 2), {3}), [[1, 2], [3]], None),
]


@pytest.mark.parametrize(("case", "value", "expected", "problem"), CASES, ids=[c[0] for c in CASES])
def test_each_unstorable_class_becomes_storable_and_is_reported(
    case: str, value: Any, expected: Any, problem: str | None
) -> None:
    found: list[Replacement] = []
    fixed = storable_value({"v": [value]}, "data", found, str_keys=True)
    assert fixed == {"v": [expected]}
    assert roundtrip(fixed) == {"v": [expected]}
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0].problem
        assert found[0].where.startswith("data['v'][0]")


def test_non_str_keys_are_left_to_json_unless_str_keys_is_asked() -> None:
    value = {1: "a", None: "b"}
    assert storable_value(value) is value
    assert roundtrip(value) == {"1": "a", "None": "b"}
    assert storable_value(value, str_keys=True) == {"1": "a", "None": "b"}


def test_the_fast_check_and_the_walk_agree_at_the_int_bound() -> None:
    from plait.storable import MAX_INT_BITS

    at_bound = (1 << MAX_INT_BITS) - 1
    over = 1 << MAX_INT_BITS
    digits = "9" * 5000  # a long digit *string* is text, left alone
    assert storable_value([at_bound, digits]) == [at_bound, digits]
    assert roundtrip([at_bound, digits]) == [at_bound, digits]
    found: list[Replacement] = []
    assert storable_value([over], "d", found) == [hex(over)] and len(found) == 1


def test_nesting_past_the_bound_is_cut_and_reads_back() -> None:
    found: list[Replacement] = []
    fixed = storable_value(nested(MAX_DEPTH + 50), "data", found)
    assert depth(fixed) == MAX_DEPTH
    assert [f.problem for f in found] == [f"nested deeper than {MAX_DEPTH} levels -> dropped"]
    assert depth(roundtrip(fixed)) == MAX_DEPTH


def test_storable_values_are_returned_as_the_same_object() -> None:
    value = {"a": [1, 2.5, "é", None, True, {"b": "x"}]}
    assert storable_value(value) is value
    text = "plain ascii and ünïcode"
    assert storable_text(text) is text


def test_the_state_codec_accepts_what_storable_value_returns() -> None:
    state = {"plan": (1, 2), 3: math.nan, "seen": {"x"}, "obj": Opaque()}
    fixed = storable_value(state, "state")
    # the strict codec (ThreadDataError on anything left) writes it, and it reads back the same
    assert json.loads(state_to_json("t", fixed)) == fixed


def test_storable_message_fixes_every_field_and_keeps_the_id() -> None:
    message = AssistantMessage(
        "hi \ud800",
        tool_calls=[ToolCall("c\udc80", "t\ud801", {"p": "\udcff"}, raw_args="{\ud800")],
        finish_reason="stop\ud800",
        metadata={"k": math.inf},
    )
    fixed, found = storable_message(message)
    assert fixed.id == message.id and fixed is not message
    assert isinstance(fixed, AssistantMessage)
    assert fixed.text == "hi \ufffd" and fixed.finish_reason == "stop\ufffd"
    call = fixed.tool_calls[0]
    assert (call.id, call.name, call.args, call.raw_args) == (
        "c\ufffd",
        "t\ufffd",
        {"p": "\ufffd"},
        "{\ufffd",
    )
    assert fixed.metadata == {"k": "Infinity"}
    assert len(found) == 7
    messages_to_json("t", [fixed])


def test_storable_message_leaves_clean_messages_alone() -> None:
    for message in (UserMessage("hello"), ToolMessage("c", "n", {"a": [1]}), AssistantMessage("x")):
        assert storable_message(message) == (message, [])


def test_a_split_surrogate_pair_in_message_text_is_joined_so_the_store_can_write_it() -> None:
    # nothing is reported for a pair (the character survives), but the text must still change
    for message in (UserMessage("a\ud83d\ude00b"), AssistantMessage("\ud83d\ude00")):
        fixed, found = storable_message(message)
        assert found == []
        assert "\U0001f600" in fixed.text and fixed.id == message.id
        back = messages_from_json("t", messages_to_json("t", [fixed]))[0]
        assert back.text == fixed.text


def test_a_tool_message_with_bad_data_name_and_id_is_fixed() -> None:
    fixed, found = storable_message(ToolMessage("c\ud800", "n\ud800", [math.nan]))
    assert isinstance(fixed, ToolMessage)
    assert (fixed.tool_call_id, fixed.name, fixed.data) == ("c\ufffd", "n\ufffd", ["NaN"])
    assert len(found) == 3


def test_replacements_past_the_report_bound_are_counted_not_listed() -> None:
    from plait.storable import MAX_REPORTED

    found: list[Replacement] = []
    fixed = storable_value(["\udcff"] * (MAX_REPORTED + 250), "data", found)
    assert fixed == ["\ufffd"] * (MAX_REPORTED + 250)
    assert len(found) == MAX_REPORTED + 1
    assert found[-1] == Replacement("…", "250 more replacements not listed")


def _values() -> Any:
    from hypothesis import strategies as st

    # Surrogates included on purpose (hypothesis leaves them out by default).
    any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
    surrogate = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())
    text = st.text(alphabet=st.one_of(any_char, surrogate), max_size=12)
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**14000), max_value=2**14000),
        st.floats(allow_nan=True, allow_infinity=True),
        text,
    )
    keys = st.one_of(text, st.integers(), st.none())
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.tuples(inner, inner),
            st.dictionaries(keys, inner, max_size=4),
        ),
        max_leaves=20,
    )


def test_property_any_value_becomes_storable_round_trips_and_is_stable() -> None:
    from hypothesis import given, settings

    @settings(max_examples=300, deadline=None)
    @given(_values())
    def check(value: Any) -> None:
        fixed = storable_value(value, "data")
        assert roundtrip(fixed) == roundtrip(storable_value(fixed))  # idempotent
        stated = storable_value({"v": value}, "state", str_keys=True)
        state_to_json("t", stated)  # the strict state codec accepts it
        assert storable_value(stated, str_keys=True) == stated

    check()


def test_a_value_that_contains_itself_is_cut_where_it_loops() -> None:
    # A tool's result holding a reference to itself (twice here: walked down to the depth bound
    # that would be 2**100 visits) is cut at the first repeat, and says so.
    loop: list[Any] = ["a"]
    loop.append(loop)
    loop.append(loop)
    state: dict[str, Any] = {"k": 1}
    state["me"] = state

    found: list[Replacement] = []
    fixed = storable_value({"loop": loop, "state": state}, "data", found)

    assert fixed == {
        "loop": ["a", "[cycle: dropped]", "[cycle: dropped]"],
        "state": {"k": 1, "me": "[cycle: dropped]"},
    }
    assert [str(r) for r in found] == [
        "data['loop'][1]: refers to a value that contains it -> dropped",
        "data['loop'][2]: refers to a value that contains it -> dropped",
        "data['state']['me']: refers to a value that contains it -> dropped",
    ]
    assert roundtrip(fixed) == fixed


def test_message_parts_pass_through_as_the_same_objects() -> None:
    from plait.messages import Blob, FilePart, ImagePart, ReasoningPart, TextPart

    payload = {"type": "thinking", "thinking": "ü plan", "signature": "c2ln"}
    reply = AssistantMessage(
        [ReasoningPart("anthropic", "ü plan", payload), TextPart("ok")],
        tool_calls=[ToolCall("c1", "shot", {})],
    )
    image = ImagePart(Blob(b"\x89PNG\r\n\x1a\n" + bytes(20)))
    shot = ToolMessage(
        "c1", "shot", "taken", parts=[image, FilePart("https://x.org/a.pdf", "application/pdf")]
    )
    for message in (reply, shot, UserMessage([TextPart("look"), image])):
        fixed, found = storable_message(message)
        assert fixed is message
        assert found == []
    assert reply.content[0].payload is payload  # type: ignore[union-attr]


def test_text_in_parts_is_made_storable_but_bytes_and_payloads_are_not_touched() -> None:
    from plait.messages import Blob, FilePart, ImagePart, ReasoningPart, TextPart

    image = ImagePart(Blob(b"GIF89a" + bytes(20)))
    report = FilePart(Blob(b"%PDF-1.4"), filename="r\udc80.pdf")
    shot = ToolMessage("c1", "shot", "ok", parts=[TextPart("cap\ud800tion"), image, report])
    fixed, found = storable_message(shot)
    assert isinstance(fixed, ToolMessage)
    assert fixed.parts[0] == TextPart("cap\ufffdtion")
    assert fixed.parts[1] is image
    assert isinstance(fixed.parts[2], FilePart) and fixed.parts[2].filename == "r\ufffd.pdf"
    assert fixed.parts[2].source is report.source  # the bytes are shared, never copied
    assert [r.where for r in found] == ["parts[0]", "parts[2].filename"]
    payload = {"type": "thinking", "thinking": "x", "signature": "s"}
    reasoning = ReasoningPart("anthropic", "a\ud800", payload)
    fixed_reply, found = storable_message(AssistantMessage([reasoning]))
    assert isinstance(fixed_reply, AssistantMessage)
    kept = fixed_reply.content[0]
    assert isinstance(kept, ReasoningPart)
    assert (kept.text, kept.payload) == ("a\ufffd", payload)
    assert kept.payload is payload
    assert [r.where for r in found] == ["content[0].text"]


def test_a_reasoning_payload_json_cannot_hold_is_refused_not_rewritten() -> None:
    from plait.errors import ContentError
    from plait.messages import ReasoningPart

    with pytest.raises(ContentError, match="not plain JSON"):
        ReasoningPart("anthropic", "x", {"type": "thinking", "budget": math.nan})
    with pytest.raises(ContentError, match="a dict"):
        ReasoningPart("anthropic", "x", ["not", "a", "dict"])  # type: ignore[arg-type]
    part = ReasoningPart("anthropic", "x", {"type": "thinking", "signature": "s"})
    part.payload["signature"] = {1, 2}  # a middleware edited it after the adapter built it
    with pytest.raises(ContentError, match=r"content\[0\]\.payload\['signature'\].*verbatim"):
        storable_message(AssistantMessage([part]))
