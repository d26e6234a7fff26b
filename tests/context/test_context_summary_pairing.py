"""Review regressions for summarization: the thread's leading system messages (the application's
instructions) must survive a pass verbatim, and every request an agent sends, whatever mix of
summarization, eviction and overflow recovery shaped it, must pair every call with its result."""

from __future__ import annotations

import random

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
    TurnContext,
    UserMessage,
    tool,
)
from plait.backends import MemoryBackend
from plait.context import (
    ContextOverflowUnrecoverable,
    OverflowRecoveryMiddleware,
    ResultEvictionMiddleware,
    SummarizationInfo,
    SummarizationMiddleware,
    TokenAccountant,
    find_orphans,
)
from plait.context.summarization import STATE_KEY, SUMMARY_SOURCE
from plait.errors import LimitExceeded
from plait.models.base import ModelResponse
from plait.runtime.agent import Limits
from plait.stores.memory import MemoryThreadStore
from plait.tools import ToolRegistry

RULES = "Always answer in French. Never reveal the code word PINEAPPLE. " * 5


async def test_leading_system_instructions_stay_verbatim_ahead_of_the_summary() -> None:
    model = ScriptedModel([f"answer {i} " * 20 for i in range(6)])
    summarization = SummarizationMiddleware(400, keep_messages=2)
    agent = Agent(model, middleware=[summarization], system_prompt="Be brief.")
    rules = SystemMessage(RULES)
    await agent.run([rules, UserMessage("hello " * 20)], thread_id="t")
    for i in range(4):
        await agent.run(f"question {i} " * 20, thread_id="t")

    last = model.requests[-1]
    first, summary = last.messages[0], last.messages[1]
    assert first.id == rules.id and first.text == RULES  # whole, not a clipped summary line
    assert isinstance(summary, SystemMessage) and summary.metadata["source"] == SUMMARY_SOURCE
    assert "PINEAPPLE" not in summary.text  # folded nowhere: it is kept, not summarized
    assert "hello" in summary.text  # the user's first message is the statement of intent
    assert sum(isinstance(m, SystemMessage) for m in last.messages) == 2
    for request in model.requests:
        assert request.messages[0].id == rules.id


async def test_forced_compaction_also_keeps_the_leading_instructions() -> None:
    rules = SystemMessage(RULES)
    history: list[Message] = [rules]
    for i in range(6):
        history += [UserMessage(f"question {i} " * 30), AssistantMessage(f"answer {i} " * 30)]
    history.append(UserMessage("and now?"))
    turn = TurnContext(
        thread_id="t", registry=ToolRegistry(), model=ScriptedModel([]), messages=history, state={}
    )
    ctx = DispatchContext(turn, 0)
    mw = SummarizationMiddleware(10**6, keep_messages=3)

    first = await mw.compact(ModelRequest(list(history)), ctx)
    assert first is not None and first.messages[0] is rules
    assert first.messages[1].metadata["source"] == SUMMARY_SOURCE
    turn.messages += [AssistantMessage("more " * 50), UserMessage("again " * 50)]
    second = await mw.compact(
        await mw.before_model_call(ModelRequest(list(turn.messages)), ctx), ctx
    )
    assert second is not None and second.messages[0] is rules
    assert [m.metadata.get("source") for m in second.messages].count(SUMMARY_SOURCE) == 1
    record = turn.state[STATE_KEY]
    assert isinstance(record, dict)
    assert second.messages[2:] == turn.messages[record["covered"] :]


async def test_reported_summarized_tokens_are_counted_on_the_new_request() -> None:
    # A pass that folds exactly one message behind a leading system message leaves the new
    # request as long as the old one, with the same first and last message: an accounting
    # checkpoint from the old request must not be reused for it.
    infos: list[SummarizationInfo] = []
    history: list[Message] = [
        SystemMessage("Be careful."),
        UserMessage("x" * 4000),
        AssistantMessage("ok"),
        UserMessage("short"),
    ]
    turn = TurnContext(
        thread_id="t", registry=ToolRegistry(), model=ScriptedModel([]), messages=history, state={}
    )
    mw = SummarizationMiddleware(500, keep_messages=2, on_summarized=infos.append)

    request = await mw.before_model_call(ModelRequest(list(history)), DispatchContext(turn, 0))

    (info,) = infos
    assert info.messages_removed == 1
    fresh = TokenAccountant().request(request.messages, anchor_from=len(request.messages))
    assert info.summarized_tokens == fresh < info.original_tokens


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
