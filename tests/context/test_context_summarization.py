"""SummarizationMiddleware beyond the seed: folding, the state record, ephemeral safety,
anchors, background offload, model summarizers, pair safety under random histories, and the
thread's leading system messages (the application's instructions) kept verbatim ahead of the
summary."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from plait import (
    Agent,
    AssistantMessage,
    DispatchContext,
    FunctionModel,
    Message,
    ModelRequest,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    TurnContext,
    Usage,
    UserMessage,
)
from plait.backends import MemoryBackend
from plait.context import (
    ExtractiveSummarizer,
    HistoryOffloaded,
    HistoryOffloadFailed,
    HistorySummarized,
    ModelSummarizer,
    SummarizationInfo,
    SummarizationMiddleware,
    SummarizerFailed,
    TokenAccountant,
)
from plait.context.summarization import STATE_KEY, SUMMARY_SOURCE
from plait.errors import ConfigurationError
from plait.messages import load_messages
from plait.middleware.context import Event
from plait.stores.base import state_to_json
from plait.tools import ToolRegistry


def make_ctx(
    messages: list[Message],
    events: list[Event] | None = None,
    state: dict[str, object] | None = None,
) -> DispatchContext:
    turn = TurnContext(
        thread_id="t1",
        registry=ToolRegistry(),
        model=ScriptedModel([]),
        messages=messages,
        state={} if state is None else state,
        emit=events.append if events is not None else (lambda e: None),
    )
    return DispatchContext(turn, 0)


def conversation(n: int, size: int = 200) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out.append(UserMessage(f"question {i} " + "q" * size))
        out.append(AssistantMessage(f"answer {i} " + "a" * size))
    return out


async def run(
    mw: SummarizationMiddleware, ctx: DispatchContext, extra: Sequence[Message] = ()
) -> ModelRequest:
    request = ModelRequest(messages=[*ctx.turn.messages, *extra])
    return await mw.before_model_call(request, ctx)


class RecordingSummarizer:
    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, list[Message]]] = []

    async def summarize(
        self, previous: str | None, messages: Sequence[Message], *, max_tokens: int
    ) -> str:
        self.calls.append((previous, list(messages)))
        return f"S{len(self.calls)}"


async def test_repeated_passes_fold_the_previous_summary_and_only_the_new_span() -> None:
    summarizer = RecordingSummarizer()
    history = conversation(10)
    ctx = make_ctx(history)
    mw = SummarizationMiddleware(500, keep_messages=4, summarizer=summarizer)
    first = await run(mw, ctx)
    assert summarizer.calls[0] == (None, history[:16])
    assert first.messages[1:] == history[16:]
    history.extend(conversation(5))
    second = await run(mw, ctx)
    previous, span = summarizer.calls[1]
    assert previous == "S1" and span == history[16:26]
    assert second.messages[1:] == history[26:]
    record = mw.record(ctx.turn)
    assert record is not None and record.covered == 26 and record.passes == 2
    assert record.boundary_id == history[25].id and record.summarizer == "recording"
    state_to_json("t1", ctx.turn.state)  # the record is plain JSON


async def test_the_summary_is_reused_byte_for_byte_below_the_threshold() -> None:
    history = conversation(10)
    ctx = make_ctx(history)
    mw = SummarizationMiddleware(1000, keep_messages=4)
    first = await run(mw, ctx)
    history.append(UserMessage("short"))
    second = await run(mw, ctx)
    assert second.messages[0] is first.messages[0]
    assert second.messages[1:] == history[16:]


async def test_summary_state_survives_a_new_turn_and_a_new_middleware_instance() -> None:
    history = conversation(10)
    ctx = make_ctx(history)
    await run(SummarizationMiddleware(1000, keep_messages=4), ctx)
    restored = make_ctx([*history, UserMessage("again")], state=dict(ctx.turn.state))
    request = await run(SummarizationMiddleware(1000, keep_messages=4), restored)
    assert isinstance(request.messages[0], SystemMessage)
    assert request.messages[0].metadata["source"] == SUMMARY_SOURCE
    assert request.messages[1:] == restored.turn.messages[16:]


async def test_ephemeral_messages_after_the_history_are_never_summarized() -> None:
    history = conversation(6)
    pinned = UserMessage("SECRET SKILL BODY " * 50, metadata={"source": "pinned_skill"})
    ctx = make_ctx(history)
    request = await run(SummarizationMiddleware(200, keep_messages=1), ctx, extra=[pinned])
    assert request.messages[-1] is pinned
    assert "SECRET" not in str(ctx.turn.state)
    assert mw_record_covered(ctx) <= len(history)


def mw_record_covered(ctx: DispatchContext) -> int:
    value = ctx.turn.state[STATE_KEY]
    assert isinstance(value, dict)
    covered = value["covered"]
    assert isinstance(covered, int)
    return covered


async def test_a_request_that_does_not_start_with_the_history_is_left_alone() -> None:
    history = conversation(10)
    ctx = make_ctx(history)
    request = ModelRequest(messages=[UserMessage("prepended"), *history])
    mw = SummarizationMiddleware(100, keep_messages=2)
    assert await mw.before_model_call(request, ctx) is request
    assert STATE_KEY not in ctx.turn.state


async def test_provider_reported_usage_triggers_a_pass() -> None:
    history: list[Message] = [
        UserMessage("hi"),
        AssistantMessage("ok", usage=Usage(input_tokens=9_000)),
        UserMessage("more"),
        AssistantMessage("sure"),
        UserMessage("and"),
    ]
    events: list[Event] = []
    request = await run(SummarizationMiddleware(10_000, keep_messages=2), make_ctx(history, events))
    assert isinstance(request.messages[0], SystemMessage)
    (event,) = [e for e in events if isinstance(e, HistorySummarized)]
    assert event.original_tokens > 9_000


async def test_usage_reported_before_a_summary_is_not_trusted_after_it() -> None:
    history = conversation(10)
    history.insert(17, AssistantMessage("stale", usage=Usage(input_tokens=50_000)))
    history.insert(17, UserMessage("u"))
    ctx = make_ctx(history)
    mw = SummarizationMiddleware(1500, keep_messages=6)
    await run(mw, ctx)
    passes = mw.record(ctx.turn)
    assert passes is not None and passes.passes == 1
    await run(mw, ctx)  # the stale 50k figure sits in the kept tail; no second pass
    again = mw.record(ctx.turn)
    assert again is not None and again.passes == 1


async def test_forced_compaction_folds_an_already_summarized_request() -> None:
    history = conversation(12)
    ctx = make_ctx(history)
    mw = SummarizationMiddleware(1000, keep_messages=10)
    summarized = await run(mw, ctx)
    smaller = SummarizationMiddleware(1000, keep_messages=2)
    smaller.state_key = mw.state_key
    forced = await smaller.compact(summarized, ctx)
    assert forced is not None and forced.messages[1:] == history[-2:]
    assert await smaller.compact(forced, ctx) is None  # nothing left to fold


async def test_offload_runs_in_the_background_and_never_blocks() -> None:
    release = asyncio.Event()

    class SlowBackend(MemoryBackend):
        async def write(self, path: str, content: str) -> str:
            await release.wait()
            return await super().write(path, content)

    backend = SlowBackend()
    events: list[Event] = []
    history = conversation(10)
    mw = SummarizationMiddleware(500, keep_messages=4, backend=backend)
    request = await asyncio.wait_for(run(mw, make_ctx(history, events)), timeout=1)
    assert isinstance(request.messages[0], SystemMessage)
    assert await backend.ls() == []
    release.set()
    await mw.drain()
    (path,) = await backend.ls()
    assert path == "conversation_history/t1/00000000-00000016.json"
    assert [m.id for m in load_messages(await backend.read(path))] == [m.id for m in history[:16]]
    assert any(isinstance(e, HistoryOffloaded) and e.messages == 16 for e in events)


async def test_offload_uses_the_configured_thread_id() -> None:
    backend = MemoryBackend()
    mw = SummarizationMiddleware(500, keep_messages=4, backend=backend, thread_id="../weird id")
    await run(mw, make_ctx(conversation(10)))
    await mw.drain()
    (path,) = await backend.ls()
    assert path.startswith("conversation_history/") and path.count("/") == 2 and ".." not in path


async def test_a_failing_summarizer_falls_back_to_extractive_with_an_event() -> None:
    def broken(request: ModelRequest) -> str:
        raise RuntimeError("summarizer down")

    events: list[Event] = []
    mw = SummarizationMiddleware(
        500, keep_messages=4, summarizer=ModelSummarizer(FunctionModel(broken))
    )
    request = await run(mw, make_ctx(conversation(10), events))
    assert "question 0" in request.messages[0].text
    failed = [e for e in events if isinstance(e, SummarizerFailed)]
    assert len(failed) == 1 and "summarizer down" in str(failed[0].error)
    summarized = [e for e in events if isinstance(e, HistorySummarized)]
    assert summarized[0].summarizer == "extractive"


async def test_model_summarizer_sends_a_summarizer_call_with_trimmed_input() -> None:
    model = FunctionModel(lambda r: "The user asked many questions.")
    summarizer = ModelSummarizer(model, max_input_tokens=2000)
    mw = SummarizationMiddleware(5000, keep_messages=4, summarizer=summarizer)
    ctx = make_ctx(conversation(300, size=1000))
    request = await run(mw, ctx)
    (sent,) = model.requests
    assert sent.call_class == "summarizer" and sent.max_tokens == mw.max_summary_tokens
    prompt = sent.messages[0].text
    assert len(prompt) <= 2000 * 4 + 100
    assert "question 0 " in prompt and "answer 297" in prompt and "messages omitted" in prompt
    assert "The user asked many questions." in request.messages[0].text
    ctx.turn.messages.extend(conversation(300, size=1000))
    await run(mw, ctx)
    assert "The user asked many questions." in model.requests[1].messages[0].text


@pytest.mark.parametrize("prompt", ["Summarize {messages}", 'Reply as {"summary": ...}', "{0}"])
def test_a_summary_prompt_with_unknown_placeholders_is_refused_when_built(prompt: str) -> None:
    # Before: the prompt failed on every pass at run time, silently falling back to extractive.
    with pytest.raises(ConfigurationError, match=r"\{max_tokens\}, \{previous\}, \{transcript\}"):
        ModelSummarizer(FunctionModel(lambda r: "x"), prompt=prompt)


async def test_a_model_summary_is_bounded_even_when_the_model_ignores_max_tokens() -> None:
    model = FunctionModel(lambda r: "word " * 100_000)
    summary = await ModelSummarizer(model).summarize(None, conversation(4), max_tokens=100)
    assert 100 <= len(summary) <= 100 * 4 * 2 + 64  # twice the budget, and a marker


def test_extractive_summary_is_deterministic_bounded_and_keeps_the_first_entry() -> None:
    summarizer = ExtractiveSummarizer()
    history = conversation(200)
    history.insert(1, AssistantMessage(tool_calls=[ToolCall("c1", "grep", {"pattern": "x" * 500})]))
    history.insert(
        2,
        ToolMessage(
            "c1", "grep", {"_evicted": True, "full_result_path": "p", "estimated_tokens": 9}
        ),
    )
    one = summarizer.fold(None, history, max_tokens=300)
    assert one == summarizer.fold(None, history, max_tokens=300)
    assert TokenAccountant().counter.count(one) <= 300
    lines = one.splitlines()
    assert lines[0].startswith("- user: question 0")
    assert "earlier entries omitted" in lines[1]
    assert lines[-1].startswith("- assistant: answer 199")
    again = summarizer.fold(one, conversation(3), max_tokens=300)
    assert again.splitlines()[0] == lines[0]
    small = summarizer.fold(None, history[:3], max_tokens=300)
    assert "[called grep(pattern=" in small and "evicted to p (9 tokens)" in small


def test_configuration_is_validated() -> None:
    for bad in ({"keep_messages": 0}, {"trigger_ratio": 0}, {"trigger_ratio": 1.5}):
        with pytest.raises(ConfigurationError, match="SummarizationMiddleware"):
            SummarizationMiddleware(100, **bad)
    with pytest.raises(ConfigurationError, match="SummarizationMiddleware"):
        SummarizationMiddleware(0)


async def test_offload_failure_is_an_event_and_the_pass_still_happens() -> None:
    class Broken(MemoryBackend):
        async def write(self, path: str, content: str) -> str:
            raise OSError("bucket gone")

    events: list[Event] = []
    mw = SummarizationMiddleware(500, keep_messages=4, backend=Broken())
    request = await run(mw, make_ctx(conversation(10), events))
    await mw.drain()
    assert isinstance(request.messages[0], SystemMessage)
    (failed,) = [e for e in events if isinstance(e, HistoryOffloadFailed)]
    assert "bucket gone" in str(failed.error)


async def test_drain_gives_up_on_a_hung_offload_at_its_deadline_and_says_so() -> None:
    # Before: drain() waited for ever on a backend write that never returned, so `plait run`
    # hung at exit behind a stuck blob store.
    class Hung(MemoryBackend):
        cancelled = False

        async def write(self, path: str, content: str) -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            return path

    events: list[Event] = []
    backend = Hung()
    mw = SummarizationMiddleware(500, keep_messages=4, backend=backend)
    await run(mw, make_ctx(conversation(10), events))
    await mw.drain(timeout=0.05)
    assert backend.cancelled
    (failed,) = [e for e in events if isinstance(e, HistoryOffloadFailed)]
    assert isinstance(failed.error, asyncio.CancelledError)
    await mw.drain(timeout=0.05)  # nothing left: returns at once


@pytest.mark.parametrize("projected", [1, 3])
async def test_keep_messages_counts_persisted_history_only_whatever_is_projected(
    projected: int,
) -> None:
    history = conversation(6)
    newest = UserMessage("the newest question")
    history.append(newest)
    bodies = [
        UserMessage(f"skill body {i} " * 40, metadata={"source": "pinned_skill"})
        for i in range(projected)
    ]
    summarizer = RecordingSummarizer()
    ctx = make_ctx(history)
    mw = SummarizationMiddleware(200, keep_messages=1, summarizer=summarizer)
    request = await run(mw, ctx, extra=bodies)
    assert request.messages[1:] == [newest, *bodies]
    ((_, folded),) = summarizer.calls
    assert newest not in folded
    assert mw_record_covered(ctx) == len(history) - 1


async def test_a_tool_result_read_this_dispatch_is_kept_with_its_call() -> None:
    history = conversation(4)
    call = AssistantMessage("", tool_calls=[ToolCall("c1", "load_skill", {"name": "pdf"})])
    result = ToolMessage("c1", "load_skill", "Loaded skill 'pdf'.")
    history += [UserMessage("use the pdf skill"), call, result]
    body = UserMessage("PDF SKILL BODY " * 40, metadata={"source": "skill_body"})
    ctx = make_ctx(history)
    request = await run(SummarizationMiddleware(200, keep_messages=2), ctx, extra=[body])
    assert request.messages[-3:] == [call, result, body]


async def test_managed_mode_the_models_own_skill_body_read_reaches_it_unfolded() -> None:
    from plait import Agent
    from plait.skills import MemorySource
    from plait.skills.managed import allow_all, create_skill_manager

    body = "BODY-MARKER-77 follow these steps."
    md = f"---\nname: pdf\ndescription: PDF work. Use for PDFs.\n---\n{body}\n"
    manager = await create_skill_manager(
        sources=[MemorySource({"pdf": {"SKILL.md": md}})], gate=allow_all
    )
    await manager.load("pdf")
    model = ScriptedModel(
        [f"answer {i} " + "a" * 400 for i in range(4)]
        + [ToolCall("c1", "read_skill_body", {"handle": "pdf"}), "done"]
    )
    summarization = SummarizationMiddleware(400, keep_messages=1)
    agent = Agent(model, middleware=[summarization, *manager.middleware])
    for i in range(5):
        await agent.run(f"question {i} " + "q" * 400, thread_id="t")
    after_read = model.requests[-1]
    assert any(
        isinstance(m, SystemMessage) and m.metadata.get("source") == SUMMARY_SOURCE
        for m in after_read.messages
    )
    assert body in "\n".join(m.text for m in after_read.messages)
    await manager.aclose()


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
