"""``MemoryThreadStore`` keeps copies, yet gives back exactly what the SQLite store gives back.

The memory store copies plain values field by field and sends anything else through the JSON
codec SQLite uses; these tests hold it to SQLite on generated messages and states, including the
values that must take the codec's path (tuples, enums, NaN, non-``str`` keys, surrogates).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
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
)
from plait.stores import MemoryThreadStore, SQLiteThreadStore, ThreadDataError


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


text = st.one_of(st.text(max_size=8), st.sampled_from(["\ud800", "🦜", "ü", "plain"]))


def json_like(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Nested values, plain and not: tuples, enums, bytes, NaN, ``int`` keys, huge ints."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        strings,
        st.sampled_from([Colour.RED, Level.HIGH, b"bytes"]),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(st.one_of(strings, st.integers(0, 3)), inner, max_size=3),
        ),
        max_leaves=8,
    )


values = json_like(text)
plain_dicts = st.dictionaries(text, values, max_size=3)
# State text without lone surrogates: SQLite fails to bind them (UnicodeEncodeError, not a
# ThreadDataError) while the memory store keeps them; sanitising text is issue 11's business.
states = st.dictionaries(st.text(max_size=8), json_like(st.text(max_size=8)), max_size=3)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    metadata = draw(plain_dicts)
    ident = draw(st.text(alphabet="0123456789abcdef", min_size=1, max_size=8))
    if kind == "tool":
        return ToolMessage(
            draw(text),
            draw(text),
            draw(values),
            is_error=draw(st.booleans()),
            metadata=metadata,
            id=ident,
        )
    parts = [TextPart(t) for t in draw(st.lists(text, max_size=2))]
    if kind == "assistant":
        calls = [
            ToolCall(draw(text), draw(text), draw(plain_dicts), draw(st.none() | text))
            for _ in range(draw(st.integers(0, 2)))
        ]
        usage = draw(st.none() | st.builds(Usage, st.integers(0, 9), st.integers(0, 9)))
        reason = draw(st.none() | text)
        return AssistantMessage(
            parts,
            tool_calls=calls,
            usage=usage,
            finish_reason=reason,
            metadata=metadata,
            id=ident,
        )
    cls = SystemMessage if kind == "system" else UserMessage
    return cls(parts, metadata=metadata, id=ident)


async def shut(store: SQLiteThreadStore) -> None:
    """Close the SQLite store."""
    await store.aclose()


async def written(store: Any, batch: Sequence[Message], state: dict[str, Any]) -> object:
    """What loading gives back after one append, or the error the append raised."""
    try:
        await store.append("t", batch, expected_version=0, state=state)
    except ThreadDataError as exc:
        return ("error", exc.where, str(exc))
    snapshot = await store.load("t")
    return snapshot.messages, snapshot.state, snapshot.version


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(messages(), max_size=3), state=states)
def test_memory_store_gives_back_exactly_what_sqlite_gives_back(
    tmp_path_factory: Any, batch: list[Message], state: dict[str, Any]
) -> None:
    path: Path = tmp_path_factory.mktemp("db") / "threads.db"
    sqlite = SQLiteThreadStore(path)
    try:
        expected = asyncio.run(written(sqlite, batch, state))
    finally:
        asyncio.run(shut(sqlite))
    assert asyncio.run(written(MemoryThreadStore(), batch, state)) == expected


async def test_plain_values_are_copied_not_shared() -> None:
    store = MemoryThreadStore()
    call = ToolCall("c1", "search", {"terms": ["a"]})
    data = {"rows": [[1, 2]]}
    batch: list[Message] = [
        AssistantMessage("x", tool_calls=[call], usage=Usage(1, 2)),
        ToolMessage("c1", "search", data, metadata={"tags": ["t"]}),
    ]
    state = {"plan": [{"step": 1}]}
    await store.append("t", batch, expected_version=0, state=state)
    call.args["terms"].append("mutated")
    data["rows"][0].append(3)
    batch[1].metadata["tags"].append("mutated")
    state["plan"][0]["step"] = 2
    first = await store.load("t")
    assert first.messages[0].tool_calls[0].args == {"terms": ["a"]}  # type: ignore[union-attr]
    assert first.messages[1].data == {"rows": [[1, 2]]}  # type: ignore[union-attr]
    assert first.messages[1].metadata == {"tags": ["t"]}
    assert first.state == {"plan": [{"step": 1}]}
    first.messages[1].data["rows"].append("mutated")  # type: ignore[union-attr]
    first.state["plan"].append("mutated")
    second = await store.load("t")
    assert second.messages[1].data == {"rows": [[1, 2]]}  # type: ignore[union-attr]
    assert second.state == {"plan": [{"step": 1}]}
    assert [m.id for m in second.messages] == [m.id for m in batch]


async def test_a_message_subclass_comes_back_as_its_base_kind_like_sqlite() -> None:
    class Tagged(UserMessage):
        __slots__ = ()

    store = MemoryThreadStore()
    await store.append("t", [Tagged("hi", id="u1")], expected_version=0)
    (loaded,) = (await store.load("t")).messages
    assert type(loaded) is UserMessage
    assert (loaded.text, loaded.id) == ("hi", "u1")


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


async def test_deep_nesting_and_huge_ints_are_decided_by_the_codec_like_sqlite(
    tmp_path: Path,
) -> None:
    for depth in (31, 32, 33, 150):
        for data in (nested(depth), {"big": 2**64}, {"huge": -(2**200)}):
            batch: list[Message] = [ToolMessage("c1", "t", data)]
            sqlite = SQLiteThreadStore(tmp_path / f"{depth}-{len(str(data))}.db")
            try:
                expected = await written(sqlite, batch, {"state": data})
            finally:
                await shut(sqlite)
            assert await written(MemoryThreadStore(), batch, {"state": data}) == expected
