"""Pair safety: safe_cut, find_orphans and repair, on fixed cases and random histories, and on
every request an agent sends whatever mix of summarization, eviction and overflow recovery
shaped it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from plait import (
    Agent,
    AssistantMessage,
    ContextOverflowError,
    DispatchContext,
    FunctionModel,
    Message,
    ModelRequest,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    TurnContext,
    UserMessage,
    tool,
)
from plait.backends import MemoryBackend
from plait.context import (
    ContextOverflowUnrecoverable,
    OverflowRecoveryMiddleware,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
    TokenAccountant,
    find_orphans,
    repair,
    safe_cut,
)
from plait.context.pairs import REPAIR_SOURCE
from plait.errors import LimitExceeded
from plait.models.base import ModelResponse
from plait.runtime.agent import Limits
from plait.stores.memory import MemoryThreadStore
from plait.tools import ToolRegistry

FAST = settings(max_examples=60, deadline=None)


def A(*ids: str, text: str = "") -> AssistantMessage:
    return AssistantMessage(text, tool_calls=[ToolCall(i, "t", {}) for i in ids])


def T(call_id: str) -> ToolMessage:
    return ToolMessage(call_id, "t", f"result {call_id}")


def U(text: str = "hi") -> UserMessage:
    return UserMessage(text)


def crossing(messages: Sequence[Message], cut: int) -> bool:
    """Brute force: does a matched pair straddle ``cut``?"""
    open_calls: dict[str, list[int]] = {}
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            for c in m.tool_calls:
                open_calls.setdefault(c.id, []).append(i)
        elif isinstance(m, ToolMessage) and open_calls.get(m.tool_call_id):
            start = open_calls[m.tool_call_id].pop()
            if start < cut <= i:
                return True
    return False


def test_safe_cut_moves_back_to_the_assistant_message_of_a_result_run() -> None:
    history: list[Message] = [U(), A("a", "b", "c"), T("a"), T("b"), T("c"), A(text="done")]
    assert safe_cut(history, 3) == 1
    assert safe_cut(history, 5) == 5
    assert safe_cut(history, 3, direction="forward") == 5


def test_safe_cut_requires_every_id_covered_not_any_id() -> None:
    # langchain #38352: a result run answering two assistant messages.
    history: list[Message] = [U(), A("a"), A("b"), T("a"), T("b"), U("next")]
    assert safe_cut(history, 2) == 1
    assert not crossing(history, safe_cut(history, 2))


def test_safe_cut_with_non_adjacent_results() -> None:
    # microsoft/agent-framework #7212: a user message between a call and its result.
    history: list[Message] = [U(), A("a"), U("interjection"), T("a"), U("end")]
    assert safe_cut(history, 2) == 1
    assert safe_cut(history, 3) == 1
    assert safe_cut(history, 4) == 4


def test_safe_cut_ignores_results_whose_call_exists_nowhere() -> None:
    history: list[Message] = [U(), A("a"), T("a"), U(), T("ghost"), U("end")]
    assert safe_cut(history, 3) == 3
    assert safe_cut(history, 5) == 5


def test_safe_cut_clamps_and_keeps_the_ends() -> None:
    history: list[Message] = [U(), A("a"), T("a")]
    assert safe_cut(history, -4) == 0
    assert safe_cut(history, 99) == 3
    assert safe_cut([], 2) == 0


def test_reused_call_ids_pair_with_the_nearest_open_call() -> None:
    history: list[Message] = [U(), A("0"), T("0"), U(), A("0"), T("0"), U()]
    assert not find_orphans(history)
    assert safe_cut(history, 5) == 4
    assert safe_cut(history, 3) == 3


def test_find_orphans_reports_results_and_calls() -> None:
    history: list[Message] = [T("x"), U(), A("a", "b"), T("a"), T("a")]
    orphans = find_orphans(history)
    assert orphans.results == (0, 4)
    assert orphans.calls == ((2, "b"),)
    assert not find_orphans([U(), A("a"), T("a")])


def test_repair_drops_orphan_results_and_answers_dangling_calls() -> None:
    a = A("a", "b")
    history: list[Message] = [T("x"), U(), a, T("a"), U("later")]
    fixed = repair(history)
    assert not find_orphans(fixed)
    assert [m.role for m in fixed] == ["user", "assistant", "tool", "tool", "user"]
    added = fixed[3]
    assert isinstance(added, ToolMessage) and added.tool_call_id == "b" and added.is_error
    assert added.metadata["source"] == REPAIR_SOURCE


def test_repair_of_a_clean_history_is_an_equal_copy() -> None:
    history: list[Message] = [U(), A("a"), T("a")]
    fixed = repair(history)
    assert fixed == history and fixed is not history


# --- random histories ---------------------------------------------------------------------


@st.composite
def valid_histories(draw: st.DrawFn) -> list[Message]:
    """Well-formed histories: every call answered once, results possibly late, interleaved,
    separated from their call, and ids reused once closed (as some providers do)."""
    messages: list[Message] = [U("start")]
    open_ids: list[str] = []
    free: list[str] = []
    serial = 0
    for _ in range(draw(st.integers(0, 25))):
        step = draw(st.sampled_from(["user", "say", "call", "answer", "answer"]))
        if step == "user":
            messages.append(U())
        elif step == "say":
            messages.append(A(text="thinking"))
        elif step == "call":
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                if len(free) > 0 and draw(st.booleans()):
                    ids.append(free.pop())
                else:
                    serial += 1
                    ids.append(f"c{serial}")
            messages.append(A(*ids))
            open_ids.extend(ids)
        elif open_ids:
            k = draw(st.integers(1, len(open_ids)))
            chosen = draw(st.permutations(open_ids))[:k]
            for call_id in chosen:
                open_ids.remove(call_id)
                messages.append(T(call_id))
                free.append(call_id)
    messages.extend(T(call_id) for call_id in open_ids)
    return messages


@st.composite
def broken_histories(draw: st.DrawFn) -> list[Message]:
    base = draw(valid_histories())
    for _ in range(draw(st.integers(0, 4))):
        if len(base) > 0 and draw(st.booleans()):
            base.pop(draw(st.integers(0, len(base) - 1)))
        else:
            base.insert(draw(st.integers(0, len(base))), T(draw(st.sampled_from(["c1", "zz"]))))
    return base


@FAST
@given(valid_histories(), st.data())
def test_safe_cut_never_splits_a_pair_and_moves_the_least(
    history: list[Message], data: st.DataObject
) -> None:
    assert not find_orphans(history)
    proposal = data.draw(st.integers(0, len(history)))
    back = safe_cut(history, proposal)
    assert back <= proposal and not crossing(history, back)
    assert all(crossing(history, c) for c in range(back + 1, proposal + 1))
    forward = safe_cut(history, proposal, direction="forward")
    assert forward >= proposal and not crossing(history, forward)
    assert all(crossing(history, c) for c in range(proposal, forward))


@FAST
@given(broken_histories())
def test_repair_always_yields_a_history_without_orphans(history: list[Message]) -> None:
    fixed = repair(history)
    assert not find_orphans(fixed)
    dropped = set(find_orphans(history).results)
    survivors = [m for i, m in enumerate(history) if i not in dropped]
    assert [m for m in fixed if m.metadata.get("source") != REPAIR_SOURCE] == survivors


@settings(max_examples=80, deadline=None)
@given(
    valid_histories(), st.integers(1, 12), st.integers(1, 400), st.sampled_from([0.5, 0.85, 1.0])
)
def test_no_request_ever_holds_an_orphan_after_summarization(
    history: list[Message], keep: int, budget: int, ratio: float
) -> None:
    async def scenario() -> None:
        turn = TurnContext(
            thread_id="t",
            registry=ToolRegistry(),
            model=ScriptedModel([]),
            messages=list(history),
            state={},
        )
        ctx = DispatchContext(turn, 0)
        mw = SummarizationMiddleware(budget, keep_messages=keep, trigger_ratio=ratio)
        for step in range(3):
            request = await mw.before_model_call(ModelRequest(list(ctx.turn.messages)), ctx)
            assert not find_orphans(request.messages)
            if request.messages and isinstance(request.messages[0], SystemMessage):
                record = mw.record(ctx.turn)
                assert record is not None
                assert request.messages[1:] == ctx.turn.messages[record.covered :]
            else:
                assert request.messages == ctx.turn.messages
            ctx.turn.messages.extend([UserMessage(f"more {step}"), AssistantMessage("ok")])

    asyncio.run(scenario())


@tool
def fetch(size: int) -> str:
    """Return ``size`` characters of log lines."""
    return f"log line {size}\n" * (size // 12 + 1)


def agent_with_everything(seed: int, problems: list[str]) -> tuple[Agent, SummarizationMiddleware]:
    rng = random.Random(seed)
    window = 3000

    def answer(request: ModelRequest) -> ModelResponse | str:
        orphans = find_orphans(request.messages)
        if orphans:
            problems.append(f"seed {seed}: orphans {orphans}")
        size = TokenAccountant().request(
            request.messages,
            system_prompt=request.system_prompt,
            tools=request.tools,
            anchor_from=len(request.messages),
        )
        if size > window:
            raise ContextOverflowError("prompt is too long", provider="fake", status=400)
        if rng.random() < 0.5:
            calls = [
                ToolCall(f"c{rng.randint(0, 4)}", "fetch", {"size": rng.choice([10, 3000, 20000])})
                for _ in range(rng.randint(1, 3))
            ]
            return ModelResponse(tool_calls=calls, finish_reason="tool_calls")
        return "ok " * rng.randint(1, 40)

    backend = MemoryBackend()
    summarization = SummarizationMiddleware(
        rng.choice([1500, 2500]), keep_messages=rng.randint(1, 6), backend=backend
    )
    middleware = [
        OverflowRecoveryMiddleware(
            summarization=summarization, backend=backend, max_input_tokens=window
        ),
        summarization,
        ResultEvictionMiddleware(rng.choice([300, 1000, 2500]), backend=backend),
    ]
    agent = Agent(
        FunctionModel(answer),
        tools=[fetch],
        middleware=middleware,
        store=MemoryThreadStore(),
        limits=Limits(model_calls_per_turn=8),
        system_prompt="You are terse.",
        default_guards=False,
    )
    return agent, summarization


async def test_no_request_ever_holds_an_orphan_with_every_strategy_combined() -> None:
    problems: list[str] = []
    for seed in range(30):
        rng = random.Random(1000 + seed)
        agent, summarization = agent_with_everything(seed, problems)
        rules = SystemMessage("Follow the house rules. " * rng.randint(1, 20))
        for t in range(6):
            text = f"question {t} " + "words " * rng.randint(1, 150)
            turn_input: list[Message] = [UserMessage(text)]
            if t == 0 and seed % 2:
                turn_input.insert(0, rules)
            try:
                if seed % 3 == 0:
                    stream = agent.stream(turn_input, thread_id="t")
                    async for _ in stream:
                        pass
                else:
                    await agent.run(turn_input, thread_id="t")
            except (ContextOverflowUnrecoverable, LimitExceeded):
                pass
        await summarization.drain()
    assert problems == []
