"""The default guards (after_model_call middleware) and model hooks: the tool-call validator, the
repetition detector (latched once it fired, past its own note), and a plain function as a
hook."""

from __future__ import annotations

import pytest

from plait import (
    Agent,
    DispatchContext,
    FunctionModel,
    Message,
    Middleware,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolContext,
    ToolMessage,
    UserMessage,
    tool,
)
from plait.guards import (
    RepetitionDetected,
    RepetitionDetector,
    RepetitionError,
    ToolCallRejected,
    ToolCallRepaired,
    ToolCallValidator,
)
from plait.runtime.repetition import jaccard
from plait.runtime.validator import repair_json_object

ran: list[str] = []


@tool
def lookup(key: str, limit: int = 5) -> str:
    """Look a key up."""
    ran.append(key)
    return f"value of {key}"


def results(result_messages: list[Message]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in result_messages if isinstance(m, ToolMessage)}


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


async def test_validator_unknown_tool_lists_the_advertised_names_and_siblings_still_run() -> None:
    model = ScriptedModel(
        [[ToolCall("c1", "lokup", {"key": "a"}), ToolCall("c2", "lookup", {"key": "b"})], "ok"]
    )
    result = await Agent(model, tools=[lookup]).run("go")
    msgs = results(result.new_messages)
    assert msgs["c1"].is_error
    assert msgs["c1"].data == "Unknown tool 'lokup'. Available tools: lookup."
    assert (msgs["c2"].data, ran) == ("value of b", ["b"])
    rejected = [e for e in result.events if isinstance(e, ToolCallRejected)]
    assert [e.call.id for e in rejected] == ["c1"]
    model.assert_complete()


async def test_validator_schema_violation_names_the_field_before_any_tool_runs() -> None:
    order: list[str] = []

    def respond(request: ModelRequest) -> ModelResponse | str:
        if len(request.messages) > 1:
            return "done"
        return ModelResponse(
            tool_calls=[
                ToolCall("c1", "lookup", {"key": "a"}),
                ToolCall("c2", "lookup", {"key": "b", "limit": "many"}),
            ]
        )

    agent = Agent(FunctionModel(respond), tools=[lookup])
    result = await agent.run("go")
    msgs = results(result.new_messages)
    order.extend(ran)
    assert order == ["a"]  # the invalid sibling never ran
    assert msgs["c2"].is_error and "limit: Input should be a valid integer" in msgs["c2"].data


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"key": "a",}', {"key": "a"}),
        ("{'key': 'a'}", {"key": "a"}),
        ("{'key': 'a', 'limit': 2,}", {"key": "a", "limit": 2}),
        ("[1, 2]", None),
        ("{key: a}", None),
        ("__import__('os').system('true')", None),
    ],
)
def test_repair_json_object(raw: str, expected: dict[str, object] | None) -> None:
    assert repair_json_object(raw) == expected


async def test_validator_repair_on_repairs_broken_json_once_and_reports_it() -> None:
    model = ScriptedModel([ToolCall("c1", "lookup", {}, raw_args="{'key': 'x',}"), "ok"])
    result = await Agent(model, tools=[lookup]).run("go")
    assert results(result.new_messages)["c1"].data == "value of x"
    repaired = [e for e in result.events if isinstance(e, ToolCallRepaired)]
    assert [e.original for e in repaired] == ["{'key': 'x',}"]
    # the persisted call carries the repaired arguments
    assert result.new_messages[1].tool_calls[0].args == {"key": "x"}  # type: ignore[union-attr]
    model.assert_complete()


async def test_validator_repair_off_rejects_bad_json() -> None:
    model = ScriptedModel([ToolCall("c1", "lookup", {}, raw_args="{'key': 'x',}"), "ok"])
    agent = Agent(
        model,
        tools=[lookup],
        default_guards=False,
        model_hooks=[ToolCallValidator(repair_json=False)],
    )
    result = await agent.run("go")
    msg = results(result.new_messages)["c1"]
    assert msg.is_error and "arguments are not a JSON object" in msg.data and ran == []
    model.assert_complete()


async def test_validator_leaves_calls_after_a_sequential_tool_to_late_resolution() -> None:
    @tool
    def late() -> str:
        """Registered by load."""
        return "late ok"

    @tool(metadata={"sequential": True})
    def load(ctx: ToolContext) -> str:
        """Register late."""
        ctx.turn.registry.register(late)
        return "loaded"

    model = ScriptedModel([[ToolCall("c1", "load", {}), ToolCall("c2", "late", {})], "ok"])
    result = await Agent(model, tools=[load]).run("go")
    assert results(result.new_messages)["c2"].data == "late ok"
    model.assert_complete()


async def test_guards_are_opt_out_per_agent() -> None:
    assert list(Agent(ScriptedModel([]), default_guards=False).middleware) == []
    chain = list(Agent(ScriptedModel([])).middleware)
    # after_model_call runs last -> first: the validator (last listed) checks first.
    assert [type(m) for m in chain] == [RepetitionDetector, ToolCallValidator]


async def test_model_hook_can_replace_the_response() -> None:
    def censor(response: ModelResponse, ctx: DispatchContext) -> ModelResponse:
        return response.replace(content=response.content.replace("secret", "[redacted]"))

    agent = Agent(ScriptedModel(["the secret is 42"]), model_hooks=[censor])
    assert (await agent.run("go")).output == "the [redacted] is 42"


async def test_model_hooks_run_in_order_after_every_after_model_call() -> None:
    seen: list[str] = []

    class Outer(Middleware):
        async def after_model_call(
            self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
        ) -> ModelResponse:
            seen.append("middleware")
            return response.replace(content=response.content + "+m")

    def first(response: ModelResponse, ctx: DispatchContext) -> ModelResponse:
        seen.append("first")
        return response.replace(content=response.content + "+1")

    async def second(response: ModelResponse, ctx: DispatchContext) -> None:
        seen.append("second")

    agent = Agent(ScriptedModel(["a"]), middleware=[Outer()], model_hooks=[first, second])
    assert (await agent.run("go")).output == "a+m+1"
    assert seen == ["middleware", "first", "second"]
    assert "model_hook(first)" in agent.describe()


# -- repetition --------------------------------------------------------------------------


def same_call_model(times: int) -> ScriptedModel:
    return ScriptedModel([ToolCall(f"c{i}", "lookup", {"key": "k"}) for i in range(times)] + ["x"])


async def test_repetition_of_identical_calls_shows_a_note_once_latched_and_stores_none() -> None:
    model = same_call_model(5)
    result = await Agent(model, tools=[lookup]).run("go")
    fired = [e for e in result.events if isinstance(e, RepetitionDetected)]
    assert [(e.kind, e.count, e.dispatch) for e in fired] == [("tool_call", 3, 2)]
    # nothing the user did not write is stored
    assert [m for m in result.new_messages if isinstance(m, UserMessage)] == [
        result.new_messages[0]
    ]
    # the model is shown the note, after the tool result, in every later request of the turn
    for request in model.requests[3:]:
        notes = [
            m
            for m in request.messages
            if isinstance(m, UserMessage) and m.metadata.get("source") == "repetition_guard"
        ]
        assert len(notes) == 1 and "3 times in a row" in notes[0].text
        assert request.messages[-1] is notes[0]
        assert isinstance(request.messages[-2], ToolMessage)
    assert not any(
        m.metadata.get("source") == "repetition_guard" for m in model.requests[2].messages
    )


async def test_repetition_error_policy_ends_the_turn_and_leaves_a_valid_thread() -> None:
    agent = Agent(
        same_call_model(5),
        tools=[lookup],
        default_guards=False,
        model_hooks=[RepetitionDetector(policy="error")],
    )
    with pytest.raises(RepetitionError, match="same tool call 3 times"):
        await agent.run("go", thread_id="t")
    snap = await agent.store.load("t")
    roles = [m.role for m in snap.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool"]


async def test_a_user_message_breaks_a_run_of_identical_calls() -> None:
    agent = Agent(
        ScriptedModel(
            [
                ToolCall("a", "lookup", {"key": "k"}),
                "one",
                ToolCall("b", "lookup", {"key": "k"}),
                "two",
                ToolCall("c", "lookup", {"key": "k"}),
                "three",
            ]
        ),
        tools=[lookup],
    )
    events = []
    for text in ("1", "2", "3"):
        events += (await agent.run(text, thread_id="t")).events
    assert not [e for e in events if isinstance(e, RepetitionDetected)]


async def test_the_same_short_answer_to_different_questions_is_not_repetition() -> None:
    answer = "I do not know the answer to that question, sorry about it"
    detector = RepetitionDetector(text_similarity=0.8)
    agent = Agent(ScriptedModel([answer] * 3), default_guards=False, model_hooks=[detector])
    stored = 0
    for question in ("host?", "port?", "anything else?"):
        result = await agent.run(question, thread_id="t")
        assert not [e for e in result.events if isinstance(e, RepetitionDetected)]
        stored += len(result.new_messages)
    assert stored == 6  # three questions, three answers: no synthetic message


async def test_repetition_of_near_identical_text_within_a_turn_fires_once() -> None:
    base = "Let me check the configuration file for the database host and port"
    texts = [base, base + " again", base + " again now", base + " again now ok"]
    script: list[ModelResponse | str] = [
        ModelResponse(content=t, tool_calls=[ToolCall(f"c{i}", "lookup", {"key": "k"})])
        for i, t in enumerate(texts)
    ]
    detector = RepetitionDetector(text_similarity=0.8, max_identical_calls=10)
    agent = Agent(
        ScriptedModel([*script, "done"]),
        tools=[lookup],
        default_guards=False,
        model_hooks=[detector],
    )
    result = await agent.run("go", thread_id="t")
    fired = [e.kind for e in result.events if isinstance(e, RepetitionDetected)]
    assert fired == ["text"]  # the third near-identical output fires; the fourth is latched


async def test_same_text_before_different_tool_calls_is_progress_not_repetition() -> None:
    text = "Let me search the knowledge base for more details on this question"
    script: list[ModelResponse | str] = [
        ModelResponse(content=text, tool_calls=[ToolCall(f"c{i}", "lookup", {"key": str(i)})])
        for i in range(4)
    ]
    agent = Agent(
        ScriptedModel([*script, "done"]),
        tools=[lookup],
        default_guards=False,
        model_hooks=[RepetitionDetector()],
    )
    result = await agent.run("go")
    assert not [e for e in result.events if isinstance(e, RepetitionDetected)]


def test_jaccard() -> None:
    assert jaccard("a b c", "A B C") == 1.0
    assert jaccard("a b", "c d") == 0.0
    assert jaccard("", "") == 1.0


async def test_repetition_fires_once_per_run_even_after_its_own_note() -> None:
    script = [ToolCall(f"c{i}", "lookup", {"key": "k"}) for i in range(7)] + ["x"]
    result = await Agent(ScriptedModel(script), tools=[lookup]).run("go")
    fired = [e for e in result.events if isinstance(e, RepetitionDetected)]
    assert [(e.kind, e.dispatch) for e in fired] == [("tool_call", 2)]
