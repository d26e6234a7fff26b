"""Review regressions for disclosure mode (SkillsMiddleware)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from plait import Agent, FunctionModel, ScriptedModel, ToolCall, ToolMessage, tool
from plait.models.base import ModelRequest
from plait.models.scripted import ScriptEntry
from plait.skills import MemorySource, SkillsMiddleware


def md(name: str, body: str = "Do it.") -> str:
    return f"---\nname: {name}\ndescription: The {name} skill.\n---\n{body}\n"


async def test_a_turn_keeps_reading_its_skills_when_another_thread_evicts_its_snapshot() -> None:
    # max_threads=1: thread "b" loading drops thread "a"'s snapshot while a's read_file call is
    # pending. Before, that read failed with "No skills are loaded for this thread ... Is the
    # middleware in the agent's middleware list?".
    source = MemorySource({"a": {"SKILL.md": md("a", "Body of a.")}})
    skills = SkillsMiddleware(sources=[source], max_threads=1)
    a_waiting, other_done = asyncio.Event(), asyncio.Event()

    @tool(metadata={"sequential": True})
    async def wait_for_other() -> str:
        """Wait."""
        a_waiting.set()
        await other_done.wait()
        return "ok"

    script: Iterator[ScriptEntry] = iter(
        [
            [
                ToolCall("w", "wait_for_other", {}),
                ToolCall("r", "read_file", {"path": "/skills/a/SKILL.md"}),
            ],
            "done",
        ]
    )

    def answer(request: ModelRequest) -> ScriptEntry:
        return next(script)

    agent_a = Agent(FunctionModel(answer), tools=[wait_for_other], middleware=[skills])
    agent_b = Agent(ScriptedModel(["b done"]), middleware=[skills], store=agent_a.store)
    run_a = asyncio.create_task(agent_a.run("go", thread_id="a"))
    await a_waiting.wait()
    await agent_b.run("go", thread_id="b")
    assert skills.snapshot("a") is None  # evicted while a's turn is still running
    other_done.set()
    result = await run_a
    reads = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    [read] = [m for m in reads if m.name == "read_file"]
    assert not read.is_error, read.text
    assert "Body of a." in read.text
