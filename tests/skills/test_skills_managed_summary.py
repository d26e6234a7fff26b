"""A skill body read in a turn never reaches the summary (thread state) or the offloaded history."""

from __future__ import annotations

from plait import Agent, ScriptedModel, ToolCall
from plait.backends import MemoryBackend
from plait.context import SummarizationMiddleware
from plait.skills import MemorySource
from plait.skills.managed import allow_all, create_skill_manager

BODY = "SECRET-BODY-MARKER " * 40
SKILL = f"---\nname: pdf\ndescription: Work with PDF files. Use for PDFs.\n---\n{BODY}\n"


async def test_summarization_folds_the_placeholder_not_the_body() -> None:
    manager = await create_skill_manager(
        sources=[MemorySource({"pdf": {"SKILL.md": SKILL}})], gate=allow_all
    )
    backend = MemoryBackend()
    summarization = SummarizationMiddleware(
        400, keep_messages=2, max_summary_tokens=2000, backend=backend
    )
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "pdf"}),
            ToolCall("c2", "read_skill_body", {"handle": "pdf"}),
            ToolCall("c3", "list_loaded_skills", {}),
            ToolCall("c4", "list_loaded_skills", {}),
            "done",
        ]
    )
    agent = Agent(model, middleware=[*manager.middleware, summarization])
    result = await agent.run("use the pdf skill", thread_id="t")
    await summarization.drain()
    assert any(e.type == "history_summarized" for e in result.events)
    stored = await agent.store.load("t")
    assert "SECRET-BODY-MARKER" not in str(stored.state)
    assert all("SECRET-BODY-MARKER" not in str(getattr(m, "data", "")) for m in stored.messages)
    for path in await backend.ls():
        assert "SECRET-BODY-MARKER" not in await backend.read(path)
    await manager.aclose()


async def test_eviction_never_writes_a_skill_body_to_its_backend() -> None:
    from plait import ToolMessage
    from plait.context import ResultEvictionMiddleware

    manager = await create_skill_manager(
        sources=[MemorySource({"pdf": {"SKILL.md": SKILL}})], gate=allow_all
    )
    backend = MemoryBackend()
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "pdf"}),
            ToolCall("c2", "read_skill_body", {"handle": "pdf"}),
            "done",
        ]
    )
    eviction = ResultEvictionMiddleware(50, backend=backend)  # the body is far above 50 tokens
    agent = Agent(model, middleware=[*manager.middleware, eviction])
    result = await agent.run("use the pdf skill", thread_id="t")
    (read,) = [
        m
        for m in model.requests[2].messages
        if isinstance(m, ToolMessage) and m.tool_call_id == "c2"
    ]
    assert "SECRET-BODY-MARKER" in read.text  # the model got it in full, live
    for path in await backend.ls():
        assert "SECRET-BODY-MARKER" not in await backend.read(path)
    assert result.output == "done"
    await manager.aclose()
