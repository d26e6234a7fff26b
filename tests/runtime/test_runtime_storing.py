"""A dispatch whose tools ran is persisted, whatever the model, a tool or middleware produced
(issue 11 §1), against the memory and the SQLite store."""

from __future__ import annotations

import math
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plait import Agent, tool
from plait.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext
from plait.models import ScriptedModel
from plait.models.base import ModelResponse
from plait.runtime.events import DispatchFinished, TextDeltaReceived, ValuesReplaced
from plait.stores import MemoryThreadStore, SQLiteThreadStore, ThreadStore

calls: list[str] = []


@tool
def side_effect(x: str) -> str:
    """Do a side effect."""
    calls.append(x)
    return "ok"


@tool
def listing() -> list[str]:
    """List a folder whose names are not UTF-8."""
    return [os.fsdecode(b"report-\xff.csv"), "fine.txt"]


@tool
def numbers() -> dict[str, Any]:
    """Return numbers JSON cannot hold."""
    return {"mean": math.nan, "max": math.inf, "big": 10**5000}


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    if request.param == "memory":
        yield MemoryThreadStore()
        return
    sqlite_store = SQLiteThreadStore(tmp_path / "threads.db")
    yield sqlite_store
    await sqlite_store.aclose()


def replaced(events: list[Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        if isinstance(e, ValuesReplaced):
            out.setdefault(e.source, []).extend(str(r) for r in e.replacements)
    return out


def roles(messages: list[Message]) -> list[str]:
    return [m.role for m in messages]


async def test_issue_reproducer_the_dispatch_is_persisted_and_the_tool_ran_once(
    store: ThreadStore,
) -> None:
    calls.clear()
    model = ScriptedModel([ToolCall("c1", "side_effect", {"x": "a\ud800b"}), "done"])
    agent = Agent(model, tools=[side_effect], store=store)
    result = await agent.run("go", thread_id="t")
    assert result.output == "done"
    assert calls == ["a\ufffdb"]  # the tool saw what the thread keeps
    snap = await store.load("t")
    assert roles(snap.messages) == ["user", "assistant", "tool", "assistant"]
    call_message = snap.messages[1]
    assert isinstance(call_message, AssistantMessage)
    assert call_message.tool_calls[0].args == {"x": "a\ufffdb"}
    assert replaced(result.events) == {
        "model_response": ["tool_calls[0].args['x']: lone surrogate U+D800 -> U+FFFD"]
    }
    model.assert_complete()


async def test_model_text_with_a_lone_surrogate_is_stored(store: ThreadStore) -> None:
    agent = Agent(ScriptedModel(["an\udcffswer"]), store=store)
    result = await agent.run("go", thread_id="t")
    assert result.output == "an\ufffdswer"
    snap = await store.load("t")
    assert snap.messages[-1].text == "an\ufffdswer"
    assert list(replaced(result.events)) == ["model_response"]


async def test_user_input_from_an_invalid_utf8_argv_is_stored(store: ThreadStore) -> None:
    argv_text = os.fsdecode(b"summarise caf\xe9.txt")  # how Python decodes a Latin-1 argv
    result = await Agent(ScriptedModel(["ok"]), store=store).run(argv_text, thread_id="t")
    snap = await store.load("t")
    assert snap.messages[0].text == "summarise caf\ufffd.txt"
    assert list(replaced(result.events)) == ["input"]
    # reported right after the turn starts
    assert result.events[0].type.startswith("turn_start")
    assert isinstance(result.events[1], ValuesReplaced)


async def test_parallel_results_are_all_kept_when_one_holds_undecodable_names(
    store: ThreadStore,
) -> None:
    model = ScriptedModel(
        [[ToolCall("a", "listing"), ToolCall("b", "side_effect", {"x": "y"})], "done"]
    )
    result = await Agent(model, tools=[listing, side_effect], store=store).run("go", thread_id="t")
    snap = await store.load("t")
    data = {m.tool_call_id: m.data for m in snap.messages if isinstance(m, ToolMessage)}
    assert data == {"a": ["report-\ufffd.csv", "fine.txt"], "b": "ok"}
    assert replaced(result.events) == {"tool:listing": ["data[0]: lone surrogate U+DCFF -> U+FFFD"]}
    model.assert_complete()


async def test_non_finite_floats_and_huge_ints_in_a_result_are_stored(store: ThreadStore) -> None:
    model = ScriptedModel([ToolCall("a", "numbers"), "done"])
    result = await Agent(model, tools=[numbers], store=store).run("go", thread_id="t")
    snap = await store.load("t")
    (message,) = [m for m in snap.messages if isinstance(m, ToolMessage)]
    assert message.data == {"mean": "NaN", "max": "Infinity", "big": hex(10**5000)}
    assert len(replaced(result.events)["tool:numbers"]) == 3
    model.assert_complete()


class AddsBadValues(Middleware):
    """Middleware that puts unstorable values into the state and into a follow-up message."""

    async def dispatch_output(self, ctx: DispatchContext, next: Any) -> None:
        ctx.turn.state["seen"] = {"a set"}
        ctx.turn.state["score"] = math.nan
        ctx.add_message(UserMessage("note \ud800", metadata={"k": (1, 2)}))
        await next()


async def test_unstorable_state_and_middleware_messages_are_fixed_at_the_write(
    store: ThreadStore,
) -> None:
    model = ScriptedModel([ToolCall("c1", "side_effect", {"x": "a"}), "done"])
    agent = Agent(model, tools=[side_effect], store=store, middleware=[AddsBadValues()])
    result = await agent.run("go", thread_id="t")
    assert result.output == "done"
    snap = await store.load("t")
    assert roles(snap.messages) == ["user", "assistant", "tool", "user", "assistant", "user"]
    assert snap.messages[3].text == "note \ufffd"
    assert snap.state["seen"] == ["a set"] and snap.state["score"] == "NaN"
    sources = replaced(result.events)
    assert "persist" in sources and "state" in sources
    model.assert_complete()


async def test_the_caller_sees_the_storable_values_the_store_holds(store: ThreadStore) -> None:
    # Regression: RunResult.new_messages and DispatchFinished kept the unstorable originals.
    model = ScriptedModel([ToolCall("c1", "side_effect", {"x": "a"}), "done"])
    agent = Agent(model, tools=[side_effect], store=store, middleware=[AddsBadValues()])
    result = await agent.run("go", thread_id="t")
    held = (await store.load("t")).messages
    assert result.new_messages == held
    assert result.new_messages[3].text == "note \ufffd"
    finished = [m for e in result.events if isinstance(e, DispatchFinished) for m in e.messages]
    assert finished == held[1:]
    assert list(model.requests[1].messages) == held[:4]  # the rest of the turn sees them too
    model.assert_complete()


async def test_a_streamed_turn_persists_the_same(store: ThreadStore) -> None:
    model = ScriptedModel([ToolCall("c1", "side_effect", {"x": "\ud800"}), "d\ud800ne"])
    agent = Agent(model, tools=[side_effect], store=store)
    events = [e async for e in agent.stream("go", thread_id="t")]
    snap = await store.load("t")
    assert roles(snap.messages) == ["user", "assistant", "tool", "assistant"]
    assert snap.messages[-1].text == "d\ufffdne"
    assert len(replaced(events)["model_response"]) == 2  # one per response
    deltas = "".join(e.text for e in events if isinstance(e, TextDeltaReceived))
    assert deltas == "d\ufffdne"  # printable live, e.g. as a JSON line
    model.assert_complete()


async def test_a_model_response_object_is_checked_like_a_scripted_one(store: ThreadStore) -> None:
    response = ModelResponse(content="x", finish_reason="stop\udc80")
    result = await Agent(ScriptedModel([response]), store=store).run("go", thread_id="t")
    snap = await store.load("t")
    last = snap.messages[-1]
    assert isinstance(last, AssistantMessage) and last.finish_reason == "stop\ufffd"
    assert list(replaced(result.events)) == ["model_response"]


async def test_a_provider_sending_escaped_surrogates_and_huge_numbers_is_persisted(
    tmp_path: Path,
) -> None:
    """Through the OpenAI SDK: JSON escapes decode to lone surrogates, ``1e400`` to ``inf``."""
    import json

    from wire_server import WireServer

    from plait.models.openai import OpenAIChatModel

    fixtures = Path(__file__).parents[1] / "models" / "fixtures"
    body = json.loads((fixtures / "openai" / "tool_call.json").read_text())
    function = body["choices"][0]["message"]["tool_calls"][0]["function"]
    function["name"] = "side_effect"
    function["arguments"] = '{"x": "caf\\udce9", "n": 1e400}'
    text = json.loads((fixtures / "openai" / "text.json").read_text())
    text["choices"][0]["message"]["content"] = "done \ud800"  # sent as the JSON escape
    store = SQLiteThreadStore(tmp_path / "threads.db")

    @tool
    def side_effect(x: str, n: float) -> str:
        """Record a side effect."""
        return f"{x}:{n}"

    with WireServer(fixtures) as server:
        server.reply_json(body)
        server.reply_json(text)
        model = OpenAIChatModel("gpt-4.1-mini", api_key="sk-test", base_url=server.url + "/v1")
        try:
            result = await Agent(model, tools=[side_effect], store=store).run("go", thread_id="t")
        finally:
            await model.aclose()
            await store.aclose()
    reopened = SQLiteThreadStore(tmp_path / "threads.db")
    snap = await reopened.load("t")
    await reopened.aclose()
    call = snap.messages[1]
    assert isinstance(call, AssistantMessage)
    assert call.tool_calls[0].args == {"x": "caf\ufffd", "n": "Infinity"}
    assert roles(snap.messages) == ["user", "assistant", "tool", "assistant"]
    assert len(replaced(result.events)["model_response"]) == 3
    assert snap.messages[-1].text == "done \ufffd"


async def test_a_retry_of_a_turn_that_failed_unanswered_stores_its_question_once(
    store: ThreadStore,
) -> None:
    from plait.errors import ProviderError
    from plait.models import FunctionModel
    from plait.models.base import ModelRequest

    failing = [True]
    seen: list[list[str]] = []

    async def flaky(request: ModelRequest) -> ModelResponse:
        seen.append([m.role for m in request.messages])
        if failing[0]:
            raise ProviderError("the provider is down")
        return ModelResponse(content="answered")

    agent = Agent(FunctionModel(flaky), store=store)
    with pytest.raises(ProviderError):
        await agent.run("What is the capital of France?", thread_id="t")
    failing[0] = False
    result = await agent.run("What is the capital of France?", thread_id="t")
    stored = (await store.load("t")).messages
    assert [(m.role, getattr(m, "text", "")) for m in stored] == [
        ("user", "What is the capital of France?"),
        ("assistant", "answered"),
    ]
    assert seen[-1] == ["user"]  # the model saw the question once
    assert result.new_messages[0] is not None and result.new_messages[0].id == stored[0].id
    # a different question after a failure is stored as asked
    failing[0] = True
    with pytest.raises(ProviderError):
        await agent.run("And of Spain?", thread_id="t")
    failing[0] = False
    await agent.run("And of Italy?", thread_id="t")
    texts = [getattr(m, "text", "") for m in (await store.load("t")).messages]
    assert texts[2:] == ["And of Spain?", "And of Italy?", "answered"]
