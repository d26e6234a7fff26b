"""Overflow recovery beside skills: a managed skill's body is never persisted, and a folded
SKILL.md read withdraws its tools on the retry. Fixed cases beside the property test in
``test_integration_invariants.py``; skills and tools come from ``tests/support/invariants_driver``.
"""

from __future__ import annotations

import json

from invariants_driver import (
    AGENT_TOOLS,
    MARKER,
    SKILL_TOOL,
    SKILLS,
    TICKETS,
    WINDOW_CHARS,
    WINDOW_TOKENS,
    disclosed_in,
    request_chars,
    ticket,
)

from plait import (
    Agent,
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolMessage,
)
from plait.backends import MemoryBackend
from plait.context import (
    OverflowRecoveryMiddleware,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
)
from plait.errors import ContextOverflowError
from plait.messages import dump_messages
from plait.skills import MemorySource, SkillsMiddleware
from plait.skills.managed import allow_all, create_skill_manager

# --- fixed cases: overflow recovery beside skills ----------------------------------------------


def _scripted_with_window(script: list[ModelResponse | str]) -> FunctionModel:
    """Answers from ``script`` in order, but first overflows like a provider whose window is
    ``WINDOW_CHARS`` (the overflowing request does not consume an entry)."""
    entries = list(script)

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request_chars(request) > WINDOW_CHARS:
            raise ContextOverflowError("too long", provider="fake")
        return entries.pop(0)

    return FunctionModel(answer)


async def test_overflow_recovery_never_persists_a_managed_skill_body() -> None:
    """Overflow recovery evicts the largest tool results but leaves projected ones (those a
    persist filter rewrites, like a ``read_skill_body`` result) alone: evicting one would write
    the body to the backend and its preview into the thread state, and so into the store. The
    other big results are enough to fit."""
    manager = await create_skill_manager(sources=[MemorySource(SKILLS)], gate=allow_all)
    backend = MemoryBackend()
    summary = SummarizationMiddleware(3000, keep_messages=4, backend=backend)
    eviction = ResultEvictionMiddleware(
        1000, backend=backend, excluded_tools=["read_skill_body", "dump"]
    )
    model = _scripted_with_window(
        [
            ModelResponse(tool_calls=[ToolCall("c1", "load_skill", {"skill": "manual"})]),
            ModelResponse(tool_calls=[ToolCall("c2", "read_skill_body", {"handle": "manual"})]),
            ModelResponse(tool_calls=[ToolCall("c3", "dump", {})]),
            "done",
        ]
    )
    agent = Agent(
        model,
        tools=AGENT_TOOLS,
        middleware=[
            OverflowRecoveryMiddleware(
                summarization=summary, eviction=eviction, max_input_tokens=WINDOW_TOKENS
            ),
            summary,
            eviction,
            *manager.middleware,
        ],
    )
    result = await agent.run("use the manual", thread_id="t")
    await summary.drain()
    await manager.aclose()
    assert result.output == "done"
    assert any(e.type == "context_overflow_recovered" for e in result.events)
    stored = await agent.store.load("t")
    assert MARKER not in dump_messages(stored.messages)
    assert MARKER not in json.dumps(stored.state)
    for path in await backend.ls():
        assert MARKER not in await backend.read(path), path


async def test_overflow_retry_withdraws_skill_tools_of_a_folded_read() -> None:
    """Overflow recovery compacts the request *inside* ``wrap_model_call``, after
    ``SkillsMiddleware`` chose the tools in ``before_model_call``. When the forced summary folds
    the SKILL.md read, the retry no longer advertises (or registers) the skill's tool: a tool is
    sent only while a read or pin of its skill is in the request."""
    summary = SummarizationMiddleware(10**6, keep_messages=2)
    seen: list[ModelRequest] = []
    script: list[ModelResponse] = [
        ModelResponse(tool_calls=[ToolCall("c1", "read_file", {"path": TICKETS})]),
        ModelResponse(tool_calls=[ToolCall("c2", "echo", {"text": "a"})]),
        ModelResponse(tool_calls=[ToolCall("c3", "dump", {})]),
        ModelResponse(tool_calls=[ToolCall("c4", SKILL_TOOL, {"title": "x"})]),
        ModelResponse(content="done"),
    ]

    def answer(request: ModelRequest) -> ModelResponse:
        if request_chars(request) > WINDOW_CHARS:
            raise ContextOverflowError("too long", provider="fake")
        seen.append(request)
        return script.pop(0)

    agent = Agent(
        FunctionModel(answer),
        tools=AGENT_TOOLS,
        middleware=[
            OverflowRecoveryMiddleware(summarization=summary, max_input_tokens=WINDOW_TOKENS),
            summary,
            SkillsMiddleware([MemorySource(SKILLS)], tools=[ticket]),
        ],
    )
    result = await agent.run("file a ticket", thread_id="t")
    assert any(e.type == "context_overflow_recovered" for e in result.events)
    for request in seen:
        advertised = SKILL_TOOL in {t.name for t in request.tools}
        assert advertised == disclosed_in(request.messages, TICKETS)
    # The withdrawn tool is unregistered too: the call fails as an unknown tool.
    (reply,) = [
        m for m in result.new_messages if isinstance(m, ToolMessage) and m.name == SKILL_TOOL
    ]
    assert reply.is_error and "Unknown tool" in str(reply.data)
