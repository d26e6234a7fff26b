"""Evicted results stay inside their thread's folder: no thread id, however crafted, shares a
folder with another, and ``read_evicted_result`` refuses ``..``, NUL, other threads' paths and
other roots.

Each test is an attack; its comment says what the attack would reach if the check were gone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from plait import DispatchContext, ScriptedModel, ToolCall, ToolResult, TurnContext
from plait.backends import LocalBackend, MemoryBackend
from plait.context import EvictedResultUnavailable, ResultEvictionMiddleware
from plait.context.offload import evicted_path, history_path, path_segment, thread_prefix
from plait.paths import PathEscapeError
from plait.tools import Tool, ToolContext, ToolRegistry


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def make_ctx(thread_id: str) -> DispatchContext:
    turn = TurnContext(
        thread_id=thread_id,
        registry=ToolRegistry(),
        model=ScriptedModel([]),
        messages=[],
        state={},
        emit=lambda e: None,
    )
    return DispatchContext(turn, 0)


async def evict(mw: ResultEvictionMiddleware, ctx: DispatchContext, call_id: str = "c1") -> str:
    result = await mw.after_tool_call(
        ToolCall(call_id, "fetch", {}), ToolResult(call_id, "SECRET " * 200), ctx
    )
    path = result.data["full_result_path"]
    assert isinstance(path, str)
    return path


async def read(tool: Tool, ctx: DispatchContext, **args: Any) -> str:
    validated = tool.validate(args)
    out = await tool.invoke(validated, ToolContext(ToolCall("r", tool.name, args), ctx.turn, ctx))
    assert isinstance(out, str)
    return out


@pytest.mark.parametrize("victim", ["user/alice", "a" * 60, "", "Ω", "x y"])
async def test_no_thread_id_shares_a_folder_with_a_sanitized_one(victim: str) -> None:
    # Attack: were a sanitized id "<clean>-<16 hex>" and an id already looking like that passed
    # through unchanged, the thread named path_segment(victim) would share the victim's
    # folder: it could page the victim's results back (and purge them).
    backend = MemoryBackend()
    mw = ResultEvictionMiddleware(10, backend=backend)
    [tool] = mw.tools()
    path = await evict(mw, make_ctx(victim))
    attacker = make_ctx(path_segment(victim))
    assert thread_prefix("r", path_segment(victim)) != thread_prefix("r", victim)
    with pytest.raises(EvictedResultUnavailable):
        await read(tool, attacker, path=path)


def test_path_segment_is_injective_on_its_own_output() -> None:
    for value in ["a/b", "a_b", "x" * 49, "0123456789abcdef", "a-0123456789abcdef", "call_1"]:
        once = path_segment(value)
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,48}", once)
        if once != value:
            assert path_segment(once) != once


@pytest.mark.parametrize(
    "path",
    [
        "large_tool_results/t1/../t2/x",
        "large_tool_results/t1/..\\t2\\x",
        "/large_tool_results/t1/../../etc/passwd",
        "large_tool_results/t1/x\x00",
    ],
)
async def test_read_evicted_result_refuses_dot_dot_and_nul(path: str) -> None:
    mw = ResultEvictionMiddleware(10, backend=MemoryBackend())
    [tool] = mw.tools()
    with pytest.raises(PathEscapeError):
        await read(tool, make_ctx("t1"), path=path)


@pytest.mark.parametrize(
    "path", ["large_tool_results/t2/x", "large_tool_results/t10/x", "/etc/passwd", "t1/x"]
)
async def test_read_evicted_result_refuses_other_threads_and_other_roots(path: str) -> None:
    backend = MemoryBackend()
    await backend.write("large_tool_results/t2/x", "OTHER")
    mw = ResultEvictionMiddleware(10, backend=backend)
    [tool] = mw.tools()
    with pytest.raises(EvictedResultUnavailable):
        await read(tool, make_ctx("t1"), path=path)


async def test_hostile_ids_build_paths_inside_the_root(tmp_path: Path) -> None:
    hostile = ["../../x", "/abs", "a\\..\\b", "\x00", "\uff0e\uff0e", "~", "-rf", "a" * 5000, "\n"]
    for thread in hostile:
        for call in hostile:
            path = evicted_path("large_tool_results", thread, call)
            parts = path.split("/")
            assert parts[0] == "large_tool_results" and len(parts) == 3
            assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,80}", p) for p in parts)
        assert history_path("h", thread, 0, 1).startswith(thread_prefix("h", thread) + "/")
    backend = LocalBackend(tmp_path / "blobs")
    mw = ResultEvictionMiddleware(10, backend=backend)
    path = await evict(mw, make_ctx("../../../x"), call_id="../../y")
    assert await backend.exists(path)
    assert await backend.ls() == [path]
    assert names(tmp_path) == ["blobs"]
