"""Managed mode: the skill body is an ephemeral projection, never persisted.

``handle`` channel: a note with a handle is projected; the model reads the body with
``read_skill_body`` and that result is replaced by a placeholder in what gets persisted.
``inline`` channel: the body itself is projected into every request. Either way the thread store
never holds it, and unload takes it out of the live context at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plait import (
    Agent,
    DispatchContext,
    Middleware,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnContext,
    tool,
)
from plait.messages import Message, dump_messages
from plait.middleware import Next
from plait.runtime import DispatchFinished
from plait.skills import MemorySource
from plait.skills.managed import SkillManager, allow_all, create_skill_manager
from plait.skills.managed.records import META_KEY, placeholder
from plait.stores.sqlite import SQLiteThreadStore

BODY = "BODY-MARKER-5d21 follow these steps carefully."


@tool
def pdf_extract(path: str) -> str:
    """Extract the text of a PDF."""
    return f"text of {path}"


async def make(**options: Any) -> SkillManager:
    md = f"---\nname: pdf\ndescription: PDF work. Use for PDFs.\n---\n{BODY}\n"
    options.setdefault("gate", allow_all)
    options.setdefault("skill_tools", {"pdf": [pdf_extract]})
    return await create_skill_manager(sources=[MemorySource({"pdf": {"SKILL.md": md}})], **options)


def read_all(folder: Path) -> bytes:
    """Every byte SQLite left in ``folder`` (the database and any journal files)."""
    return b"".join(p.read_bytes() for p in folder.iterdir())


def text(messages: Sequence[Message]) -> str:
    return dump_messages(messages)


class Watch(Middleware):
    """Snapshots ``turn.messages`` and ``turn.ephemeral`` after every dispatch."""

    def __init__(self) -> None:
        self.live: list[str] = []
        self.ephemeral: list[list[Message]] = []

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        self.live.append(text(ctx.turn.messages))
        self.ephemeral.append(list(ctx.turn.ephemeral))
        await next()


async def test_handle_channel_projects_a_note_and_keeps_the_read_out_of_the_store() -> None:
    m = await make()
    await m.load("pdf")
    model = ScriptedModel([ToolCall("c1", "read_skill_body", {"handle": "pdf"}), "done"])
    agent = Agent(model, middleware=[*m.middleware])
    result = await agent.run("go", thread_id="t")
    first = model.requests[0]
    [note] = [x for x in first.messages if isinstance(x, SystemMessage)]
    assert note.metadata[META_KEY] == {"skill": "pdf", "kind": "handle"}
    assert m.record("pdf").handle in note.text and BODY not in note.text
    assert BODY in text(model.requests[1].messages)  # the read, live in this turn

    [persisted] = [x for x in result.new_messages if isinstance(x, ToolMessage)]
    [live] = [
        x for x in model.requests[1].messages if isinstance(x, ToolMessage) and x.id == persisted.id
    ]
    assert (
        persisted.data
        == placeholder("pdf")
        == "[skill body of pdf omitted: projected, not persisted]"
    )
    assert persisted.tool_call_id == live.tool_call_id == "c1"
    assert persisted.metadata[META_KEY]["kind"] == "omitted"
    snapshot = await agent.store.load("t")
    assert BODY not in text(snapshot.messages)
    assert placeholder("pdf") in text(snapshot.messages)


async def test_inline_channel_projects_the_body_into_every_request_never_the_store() -> None:
    m = await make(default_channel="inline")
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "pdf"}),
            "one",
            ToolCall("c2", "list_skills", {}),
            "two",
        ]
    )
    agent = Agent(model, middleware=[*m.middleware])
    await agent.run("a", thread_id="t")
    await agent.run("b", thread_id="t")
    bodies = [BODY in text(r.messages) for r in model.requests]
    assert bodies == [False, True, True, True]  # from the request after the load, every turn
    assert BODY not in text((await agent.store.load("t")).messages)


async def test_dispatch_events_and_run_result_carry_placeholders_only() -> None:
    m = await make()
    await m.load("pdf")
    model = ScriptedModel([ToolCall("c1", "read_skill_body", {"handle": "pdf"}), "done"])
    result = await Agent(model, middleware=[*m.middleware]).run("go")
    assert BODY not in text(result.new_messages)
    ends = [e for e in result.events if isinstance(e, DispatchFinished)]
    assert all(BODY not in text(e.messages) for e in ends)


async def test_unload_mid_turn_removes_the_body_from_ephemeral_and_the_turns_reads() -> None:
    for channel in ("handle", "inline"):
        m = await make(default_channel=channel)
        await m.load("pdf")
        watch = Watch()
        model = ScriptedModel(
            [
                ToolCall("c1", "read_skill_body", {"handle": "pdf"}),
                ToolCall("c2", "unload_skill", {"skill": "pdf"}),
                "done",
            ]
        )
        await Agent(model, middleware=[*m.middleware, watch]).run("go")
        assert BODY in watch.live[0]  # after the read
        assert BODY not in watch.live[1]  # the unload replaced the turn's read
        assert watch.ephemeral[1] == []  # and took the projection out of ephemeral
        assert BODY not in text(model.requests[2].messages)
        assert placeholder("pdf") in text(model.requests[2].messages)


async def test_read_then_unload_in_one_response_still_never_reaches_the_store() -> None:
    m = await make()
    await m.load("pdf")
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "read_skill_body", {"handle": "pdf"}),
                ToolCall("c2", "unload_skill", {"skill": "pdf"}),
            ],
            "done",
        ]
    )
    agent = Agent(model, middleware=[*m.middleware])
    await agent.run("go", thread_id="t")
    assert BODY not in text(model.requests[1].messages)
    assert BODY not in text((await agent.store.load("t")).messages)


async def test_the_sqlite_thread_store_file_never_holds_a_body(tmp_path: Path) -> None:
    m = await make()
    store = SQLiteThreadStore(tmp_path / "threads.db")
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "pdf"}),
            ToolCall("c2", "read_skill_body", {"handle": "pdf"}),
            "done",
        ]
    )
    await Agent(model, store=store, middleware=[*m.middleware]).run("go", thread_id="t")
    await store.aclose()
    raw = read_all(tmp_path)
    assert BODY.encode() not in raw
    assert placeholder("pdf").encode() in raw


async def test_downstream_output_middleware_sees_neither_body_nor_skill_tools() -> None:
    m = await make(default_channel="inline")
    await m.load("pdf")
    seen: list[tuple[str, set[str]]] = []

    class Persist(Middleware):
        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            seen.append((text([*ctx.messages, *ctx.ephemeral]), {t.name for t in ctx.registry}))
            await next()

    model = ScriptedModel([ToolCall("c1", "read_skill_body", {"handle": "pdf"}), "done"])
    await Agent(model, middleware=[*m.middleware, Persist()]).run("go")
    [(messages, names)] = seen
    assert BODY not in messages and "pdf_extract" not in names
    assert "read_skill_body" in names  # lifecycle tools are not projections


async def test_a_tool_can_see_the_body_read_recorded_on_its_turn() -> None:
    m = await make()
    await m.load("pdf")
    reads: list[int] = []

    @tool
    def count_reads(ctx: ToolContext) -> int:
        """How many body reads this turn holds."""
        reads.extend(p.body_reads for p in m.projected(ctx.turn))
        return len(reads)

    model = ScriptedModel(
        [
            ToolCall("c1", "read_skill_body", {"handle": "pdf"}),
            ToolCall("c2", "read_skill_body", {"handle": "pdf"}),
            ToolCall("c3", "count_reads", {}),
            "done",
        ]
    )
    await Agent(model, tools=[count_reads], middleware=[*m.middleware]).run("go")
    assert reads == [2]
