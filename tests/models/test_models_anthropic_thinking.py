"""Extended thinking through the real ``anthropic`` SDK against the strict local Messages server
(:mod:`anthropic_server`): thinking blocks kept, streamed and replayed verbatim across a tool
loop; the settings that turn it on and the ones the API refuses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import pytest
from anthropic_server import AnthropicServer

from plait import Agent, DispatchContext, Middleware, tool
from plait.errors import ConfigurationError, ProviderError
from plait.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    TextPart,
    ToolCall,
    UserMessage,
)
from plait.models.anthropic import AnthropicModel
from plait.models.base import (
    ModelRequest,
    ModelSettings,
    Reasoning,
    ReasoningDelta,
    ResponseComplete,
)
from plait.runtime.events import ReasoningDeltaReceived, ReasoningDropped

THINK = ModelSettings(reasoning=Reasoning(budget_tokens=2048))
CALLS = 20


def loop_brain(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Think, then call ``step`` until 19 results are in; think, then answer."""
    done = sum(1 for m in body["messages"] if m["role"] == "assistant")
    thinking = body.get("thinking", {}).get("type") == "enabled"
    blocks: list[dict[str, Any]] = []
    if thinking:
        blocks.append({"type": "thinking", "thinking": f"Step {done}: I need step {done + 1}."})
    if done < CALLS - 1:
        blocks.append({"type": "tool_use", "name": "step", "input": {"n": done + 1}})
    else:
        blocks.append({"type": "text", "text": f"All {done} steps done."})
    return blocks


@tool
def step(n: int) -> str:
    """Do step ``n``."""
    return f"step {n} ok"


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer(loop_brain) as wire:
        yield wire


@pytest.fixture
async def model(server: AnthropicServer) -> AsyncIterator[AnthropicModel]:
    adapter = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url)
    yield adapter
    await adapter.aclose()


def assert_replayed(server: AnthropicServer) -> None:
    """Every continuation sent each earlier thinking block back first, exactly as issued."""
    for number, received in enumerate(server.received):
        assert received.refused is None
        assistants = [m for m in received.body["messages"] if m["role"] == "assistant"]
        assert len(assistants) == number
        for index, message in enumerate(assistants):
            first = message["content"][0]
            assert first["type"] == "thinking"
            assert first["thinking"] == f"Step {index}: I need step {index + 1}."
            assert first["signature"] == server.sign(first["thinking"])
            assert [b["type"] for b in message["content"]] == ["thinking", "tool_use"]


async def test_a_20_call_tool_loop_with_thinking_passes(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    agent = Agent(model, tools=[step], model_settings=THINK)

    result = await agent.run("Do the steps.")

    assert result.output == f"All {CALLS - 1} steps done."
    assert len(server.received) == CALLS
    assert_replayed(server)
    first = server.received[0].body
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 2048 + 4096  # the budget on top of the default answer room
    assert "temperature" not in first
    final = result.new_messages[-1]
    assert isinstance(final, AssistantMessage)
    [thought, text] = final.content
    assert isinstance(thought, ReasoningPart) and thought.provider == "anthropic"
    assert thought.payload == {
        "type": "thinking",
        "thinking": f"Step {CALLS - 1}: I need step {CALLS}.",
        "signature": server.sign(f"Step {CALLS - 1}: I need step {CALLS}."),
    }
    assert text == TextPart(f"All {CALLS - 1} steps done.")


async def test_a_streamed_20_call_loop_streams_thinking_and_replays_it(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    agent = Agent(model, tools=[step])

    stream = agent.stream("Do the steps.", model_settings=THINK)
    events = [event async for event in stream]

    assert stream.result is not None
    assert stream.result.output == f"All {CALLS - 1} steps done."
    assert len(server.received) == CALLS
    assert all(r.body["stream"] is True for r in server.received)
    assert_replayed(server)
    deltas = [e for e in events if isinstance(e, ReasoningDeltaReceived)]
    by_dispatch: dict[int, str] = {}
    for delta in deltas:
        by_dispatch[delta.dispatch] = by_dispatch.get(delta.dispatch, "") + delta.text
    assert by_dispatch == {n: f"Step {n}: I need step {n + 1}." for n in range(CALLS)}


class EditSignature(Middleware):
    """Rewrites the signature of every thinking block (what a careless message rewrite does)."""

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        messages = []
        for message in request.messages:
            if isinstance(message, AssistantMessage):
                content = [
                    ReasoningPart(p.provider, p.text, {**p.payload, "signature": "0" * 64})
                    if isinstance(p, ReasoningPart)
                    else p
                    for p in message.content
                ]
                message = AssistantMessage(content, tool_calls=message.tool_calls)
            messages.append(message)
        return request.replace(messages=messages)


class DropReasoning(Middleware):
    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        messages = [
            AssistantMessage(
                [p for p in m.content if not isinstance(p, ReasoningPart)],
                tool_calls=m.tool_calls,
            )
            if isinstance(m, AssistantMessage)
            else m
            for m in request.messages
        ]
        return request.replace(messages=messages)


async def test_an_edited_signature_fails_the_loop_with_the_400_as_a_provider_error(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    agent = Agent(model, tools=[step], middleware=[EditSignature()], model_settings=THINK)

    with pytest.raises(ProviderError) as caught:
        await agent.run("Do the steps.")

    assert caught.value.status == 400
    assert "Invalid `signature` in `thinking` block" in str(caught.value)
    assert len(server.received) == 2  # the first call passed; its continuation was refused
    assert server.received[1].refused is not None


async def test_a_continuation_without_its_thinking_block_is_refused_like_the_real_api(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    agent = Agent(model, tools=[step], middleware=[DropReasoning()], model_settings=THINK)

    with pytest.raises(ProviderError) as caught:
        await agent.run("Do the steps.")

    assert caught.value.status == 400
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in str(caught.value)


async def test_the_server_refuses_reordered_reasoning_blocks(server: AnthropicServer) -> None:
    server.brain = lambda body: [
        {"type": "thinking", "thinking": "First."},
        {"type": "thinking", "thinking": "Second."},
        {"type": "tool_use", "name": "step", "input": {"n": 1}},
    ]
    client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=server.url, max_retries=0)
    sent: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 8192,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [{"role": "user", "content": "Go."}],
    }
    first = await client.messages.create(**sent)
    a, b, use = [block.model_dump(exclude_none=True) for block in first.content]
    result = {"type": "tool_result", "tool_use_id": use["id"], "content": "ok"}

    def continuation(content: list[dict[str, Any]]) -> dict[str, Any]:
        messages = [*sent["messages"], {"role": "assistant", "content": content}]
        return {**sent, "messages": [*messages, {"role": "user", "content": [result]}]}

    for content in ([b, a, use], [a, use, b], [a, a, use]):
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(**continuation(content))
        assert "thinking" in str(caught.value)
    await client.messages.create(**continuation([a, b, use]))
    await client.close()
    assert [r.refused is None for r in server.received] == [True, False, False, False, True]


def redacted_brain(body: dict[str, Any]) -> list[dict[str, Any]]:
    if len(body["messages"]) == 1:
        return [
            {"type": "redacted_thinking"},
            {"type": "tool_use", "name": "step", "input": {"n": 1}},
        ]
    return [{"type": "text", "text": "done"}]


@pytest.mark.parametrize("streaming", [False, True])
async def test_redacted_thinking_round_trips(streaming: bool) -> None:
    with AnthropicServer(redacted_brain) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url)
        agent = Agent(model, tools=[step], model_settings=THINK)
        if streaming:
            stream = agent.stream("Go.")
            [event async for event in stream]
            assert stream.result is not None
            output = stream.result.output
        else:
            output = (await agent.run("Go.")).output
        await model.aclose()

    assert output == "done"
    issued = server.received[0]
    replayed = server.received[1].body["messages"][1]["content"][0]
    assert replayed["type"] == "redacted_thinking"
    assert replayed["data"] and set(replayed) == {"type", "data"}
    assert issued.refused is None and server.received[1].refused is None


async def test_a_whole_answer_keeps_thinking_blocks_in_order(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    response = await model.generate(
        ModelRequest(messages=[UserMessage("Go.")], reasoning=Reasoning(budget_tokens=1024))
    )

    [thought] = response.reasoning
    assert thought.text == "Step 0: I need step 1."
    assert thought.payload["signature"] == server.sign(thought.text)
    assert response.tool_calls[0].name == "step"
    message = response.to_message()
    assert message.content[0] is thought


async def test_a_stream_yields_reasoning_deltas_before_the_tool_call(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    request = ModelRequest(messages=[UserMessage("Go.")], reasoning=Reasoning(effort="low"))

    events = [event async for event in model.stream(request)]

    deltas = [e for e in events if isinstance(e, ReasoningDelta)]
    assert "".join(d.text for d in deltas) == "Step 0: I need step 1."
    assert {d.index for d in deltas} == {0}
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    [thought] = final.response.reasoning
    assert thought.payload == {
        "type": "thinking",
        "thinking": "Step 0: I need step 1.",
        "signature": server.sign("Step 0: I need step 1."),
    }
    assert server.received[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


# --- settings --------------------------------------------------------------------------------


async def test_interleaved_thinking_sends_the_beta_header_and_extra_goes_in_the_body(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    settings = Reasoning(budget_tokens=4000, interleaved=True)
    request = ModelRequest(
        messages=[UserMessage("Go.")],
        reasoning=settings,
        max_tokens=6000,
        extra={"metadata": {"user_id": "u-1"}},
    )

    await model.generate(request)

    [sent] = server.received
    assert "interleaved-thinking-2025-05-14" in sent.headers["anthropic-beta"]
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    assert sent.body["max_tokens"] == 6000
    assert sent.body["metadata"] == {"user_id": "u-1"}


async def test_thinking_turned_off_is_sent_as_disabled(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    request = ModelRequest(messages=[UserMessage("Go.")], reasoning=Reasoning(enabled=False))

    response = await model.generate(request)

    assert server.received[0].body["thinking"] == {"type": "disabled"}
    assert response.reasoning == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"reasoning": Reasoning(budget_tokens=512)}, "at least 1,024"),
        ({"reasoning": Reasoning(budget_tokens=4096), "max_tokens": 4096}, "below max_tokens"),
        ({"reasoning": Reasoning(budget_tokens=2048), "temperature": 0.2}, "temperature=0.2"),
        (
            {"reasoning": Reasoning(budget_tokens=2048), "tool_choice": "required"},
            "tool_choice='required'",
        ),
    ],
)
async def test_settings_the_api_refuses_are_configuration_errors_before_sending(
    server: AnthropicServer, model: AnthropicModel, changes: dict[str, Any], message: str
) -> None:
    request = ModelRequest(messages=[UserMessage("Go.")], tools=[step.definition], **changes)

    with pytest.raises(ConfigurationError, match=message):
        await model.generate(request)

    assert server.received == []


async def test_foreign_reasoning_is_dropped_from_the_request_and_reported(
    server: AnthropicServer, model: AnthropicModel
) -> None:
    foreign = ReasoningPart("openai-responses", "hmm", {"type": "reasoning", "id": "rs_1"})
    history: list[Message] = [
        UserMessage("Earlier."),
        AssistantMessage([foreign, TextPart("Earlier answer.")]),
    ]
    agent = Agent(model, tools=[step])
    thread = "t-switch"
    await agent.store.append(thread, history, expected_version=0)

    brain_calls = 0

    def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
        nonlocal brain_calls
        brain_calls += 1
        return [{"type": "text", "text": "ok"}]

    server.brain = answer
    result = await agent.run("Now.", thread_id=thread)

    assert result.output == "ok"
    sent = server.received[0].body["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Earlier answer."}],
    }
    [dropped] = [e for e in result.events if isinstance(e, ReasoningDropped)]
    assert (dropped.dispatch, dropped.provider, dropped.count) == (0, "openai-responses", 1)


def test_tool_calls_with_ids_are_replayed_after_reasoning() -> None:
    from plait.models.anthropic import to_anthropic_messages

    thought = ReasoningPart(
        "anthropic", "x", {"type": "thinking", "thinking": "x", "signature": "s"}
    )
    message = AssistantMessage([thought, TextPart("t")], tool_calls=[ToolCall("c1", "step", {})])

    _, [sent] = to_anthropic_messages(ModelRequest(messages=[message]))

    content: list[Any] = list(sent["content"])
    assert [b["type"] for b in content] == ["thinking", "text", "tool_use"]
    assert content[0] is thought.payload  # verbatim: the very dict, not a rebuilt one
