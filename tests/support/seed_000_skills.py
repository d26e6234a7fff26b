"""Shared skills, tools and middleware of the seed 000 tests (tests/seeds/test_seed_000_*.py):
a ``pdf`` skill whose body carries a marker, its tools, a manager factory, and two recording
middleware (:class:`Capture` in ``turn_input``, :class:`Downstream` in ``turn_output``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plait import (
    Agent,
    Middleware,
    ToolMessage,
    TurnContext,
    tool,
)
from plait.messages import Message, dump_messages
from plait.middleware import Next
from plait.skills import MemorySource
from plait.skills.managed import (
    SkillManager,
    allow_all,
    create_skill_manager,
)

BODY = "PDF-BODY-7f3a: extract the text with pdf_extract, then summarise it."
BODY_V2 = "PDF-BODY-V2-91c: a newer way to extract text."


def skill_md(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: Work with {name} files. Use for {name}.\n---\n{body}\n"


@tool
def pdf_extract(path: str) -> str:
    """Extract the text of a PDF."""
    return f"text of {path}"


@tool
def csv_rows(path: str) -> int:
    """Count the rows of a CSV file."""
    return 3


def pdf_source(body: str = BODY, **files: str) -> MemorySource:
    return MemorySource({"pdf": {"SKILL.md": skill_md("pdf", body), **files}})


async def make_manager(source: MemorySource | None = None, **options: Any) -> SkillManager:
    options.setdefault("gate", allow_all)
    options.setdefault("skill_tools", {"pdf": [pdf_extract]})
    return await create_skill_manager(sources=[source or pdf_source()], **options)


def text(messages: Sequence[Message]) -> str:
    return dump_messages(messages)


async def stored(agent: Agent, thread_id: str) -> str:
    return text((await agent.store.load(thread_id)).messages)


def exists(path: Path) -> bool:
    return path.exists()


def result_of(messages: list[Message], call_id: str) -> ToolMessage:
    found = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    assert found, f"no result for {call_id}"
    return found[0]


class Capture(Middleware):
    """Records the contexts it sees in ``turn_input`` (and nothing else)."""

    def __init__(self) -> None:
        self.turns: list[TurnContext] = []
        self.names: list[set[str]] = []

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        self.turns.append(ctx)
        self.names.append({t.name for t in ctx.registry})
        await next()


class Downstream(Middleware):
    """A turn_output middleware (observation or secondary persistence) placed after the set."""

    def __init__(self) -> None:
        self.names: list[set[str]] = []
        self.seen: list[str] = []

    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        self.names.append({t.name for t in ctx.registry})
        self.seen.append(text([*ctx.messages, *ctx.ephemeral]))
        await next()
