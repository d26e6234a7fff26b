"""Cache-stable context (issue 25), against the local Anthropic server's caching rule
(:mod:`anthropic_cache_rule`): over a long tool session with summarization and eviction
firing, every call reads back the whole previous request except the one call per summary pass
(``CacheBroken``, reason ``summary``); an evicted result is the same bytes in every request
from the first that carries it; tool definitions are the same bytes, in the same order, on every
call and in a second agent built alike; a skills catalog change breaks at the system prompt
once, a pinned skill not at all."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anthropic_server import AnthropicServer

from plait import Agent
from plait.backends import MemoryBackend
from plait.context import (
    HistorySummarized,
    ResultEvicted,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
)
from plait.middleware.base import Middleware
from plait.models.anthropic import AnthropicModel
from plait.runtime import CacheBroken, CacheWatch
from plait.skills import SkillsMiddleware
from plait.tools import tool

SIZES = (300, 1_500, 6_000)


@tool
def read_report(turn: int) -> str:
    """Read the report of one turn."""
    line = f"report {turn}: row data, nothing unusual here. "
    size = SIZES[turn % len(SIZES)]
    return (line * (size // len(line) + 1))[:size]


@tool
def archive(turn: int) -> str:
    """Archive one report."""
    return f"archived {turn}"


def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if any(b.get("type") == "tool_result" for b in blocks):
        return [{"type": "text", "text": "Noted."}]
    text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    found = re.search(r"#(\d+)", text)
    turn = int(found[1]) if found else 0
    return [{"type": "tool_use", "name": "read_report", "input": {"turn": turn}}]


def _totals(server: AnthropicServer) -> list[tuple[int, int]]:
    """``(prompt tokens, cache reads)`` of every request, as the server's rule counted them."""
    return [
        (
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"],
            u["cache_read_input_tokens"],
        )
        for u in server.cache.log
    ]


async def _session(
    server: AnthropicServer, middleware: Sequence[Middleware], turns: int, thread: str
) -> list[object]:
    model = AnthropicModel("claude-sonnet-4-5", api_key="k", base_url=server.url)
    agent = Agent(
        model,
        tools=[read_report, archive],
        middleware=[*middleware, CacheWatch()],
        system_prompt="You read reports. " * 300,
    )
    events: list[object] = []
    for turn in range(1, turns + 1):
        result = await agent.run(f"Read the report of turn #{turn}", thread_id=thread)
        events.extend(result.events)
    await model.aclose()
    return events


def _results_by_call(server: AnthropicServer) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for received in server.received:
        for message in received.body["messages"]:
            content = message["content"]
            for block in content if isinstance(content, list) else ():
                if block.get("type") == "tool_result":
                    clean = {k: v for k, v in block.items() if k != "cache_control"}
                    seen.setdefault(block["tool_use_id"], set()).add(json.dumps(clean["content"]))
    return seen


async def test_summarization_breaks_once_per_firing_and_eviction_never() -> None:
    backend = MemoryBackend()
    summarizer = SummarizationMiddleware(6_000, keep_messages=6, backend=backend)
    evictor = ResultEvictionMiddleware(1_000, backend=backend)
    with AnthropicServer(brain) as server:
        events = await _session(server, [summarizer, evictor], 36, "ctx")
        await summarizer.drain()

    firings = [e for e in events if isinstance(e, HistorySummarized)]
    evicted = [e for e in events if isinstance(e, ResultEvicted)]
    breaks = [e for e in events if isinstance(e, CacheBroken)]
    assert len(firings) >= 2, "the threshold was crossed more than once"
    assert len(evicted) >= 10
    assert [b.reason for b in breaks] == ["summary"] * len(firings)
    totals = _totals(server)
    short = [i for i in range(1, len(totals)) if totals[i][1] < totals[i - 1][0]]
    # every other call read the whole previous request back from the cache
    assert len(short) == len(firings)
    # an evicted result: one form, from the first request that carries it to the last
    results = _results_by_call(server)
    assert sum(1 for forms in results.values() if "_evicted" in next(iter(forms))) >= 10
    assert all(len(forms) == 1 for forms in results.values()), results


async def test_tool_definitions_are_the_same_bytes_in_the_same_order(tmp_path: Path) -> None:
    def build() -> list[Middleware]:
        backend = MemoryBackend()
        return [
            SummarizationMiddleware(6_000, keep_messages=6, backend=backend),
            ResultEvictionMiddleware(1_000, backend=backend),
            SkillsMiddleware([_skills(tmp_path)]),
        ]

    with AnthropicServer(brain) as server:
        await _session(server, build(), 24, "a")
        await _session(server, build(), 3, "b")
    tools = {json.dumps(_clean_tools(r.body)) for r in server.received}
    assert len(tools) == 1, "one tools array, byte for byte, for every call of both agents"
    names = [t["name"] for t in json.loads(tools.pop())]
    assert names[:2] == ["read_report", "archive"]  # the agent's own tools first, as given
    totals = _totals(server)
    assert all(read > 0 for _, read in totals[1:]), "the tools prefix is read on every call"


async def test_a_catalog_change_breaks_at_the_system_prompt_once_a_pin_never(
    tmp_path: Path,
) -> None:
    skills = _skills(tmp_path)
    model_server = AnthropicServer(brain)
    with model_server as server:
        model = AnthropicModel("claude-sonnet-4-5", api_key="k", base_url=server.url)
        agent = Agent(
            model,
            tools=[read_report],
            middleware=[SkillsMiddleware([skills], auto_refresh=True), CacheWatch()],
            system_prompt="You read reports. " * 300,
        )
        breaks: list[tuple[int, CacheBroken]] = []
        for turn in range(1, 9):
            if turn == 4:
                _write_skill(skills, 9)
            state = {"pinned_skills": ["skill-01"]} if turn == 6 else None
            result = await agent.run(f"Report #{turn}", thread_id="k", state=state)
            breaks += [(turn, e) for e in result.events if isinstance(e, CacheBroken)]
        await model.aclose()

    assert [(turn, b.where, b.reason) for turn, b in breaks] == [
        (4, "system", "system prompt changed")
    ]
    assert "skill-09" in json.dumps(server.received[-1].body["system"])
    totals = _totals(server)
    short = [i for i in range(1, len(totals)) if totals[i][1] < totals[i - 1][0]]
    assert len(short) == 1  # the catalog change; the pin only appended a message


def _clean_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.items() if k != "cache_control"} for t in body.get("tools", [])]


def _write_skill(root: Path, i: int) -> None:
    folder = root / f"skill-{i:02d}"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: skill-{i:02d}\ndescription: Handles report kind {i}.\n---\n\nSteps {i}.\n"
    )


def _skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    if not root.exists():
        for i in range(5):
            _write_skill(root, i)
    return root
