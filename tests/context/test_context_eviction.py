"""ResultEvictionMiddleware beyond the seed: huge lines, hostile ids, paging back, write
failures, retention."""

from __future__ import annotations

import re
from typing import Any

import pytest

from plait import DispatchContext, ScriptedModel, ToolCall, ToolResult, TurnContext
from plait.backends import MemoryBackend
from plait.context import (
    EvictedResultsPurged,
    EvictedResultUnavailable,
    EvictionFailed,
    ResultEvicted,
    ResultEvictionMiddleware,
    RetentionFailed,
    RetentionPolicy,
    purge_thread,
)
from plait.context.offload import READ_TOOL_NAME, path_segment, preview, written_at
from plait.context.retention import expired
from plait.errors import ConfigurationError
from plait.middleware.context import Event
from plait.paths import normalize_virtual_path
from plait.tools import Tool, ToolContext, ToolRegistry


def make_ctx(thread_id: str = "t1", events: list[Event] | None = None) -> DispatchContext:
    sink = events.append if events is not None else (lambda e: None)
    turn = TurnContext(
        thread_id=thread_id,
        registry=ToolRegistry(),
        model=ScriptedModel([]),
        messages=[],
        state={},
        emit=sink,
    )
    return DispatchContext(turn, 0)


async def evict(
    mw: ResultEvictionMiddleware, data: Any, *, call_id: str = "c1", ctx: DispatchContext | None
) -> Any:
    call = ToolCall(call_id, "fetch", {})
    result = await mw.after_tool_call(call, ToolResult(call_id, data), ctx or make_ctx())
    return result.data


class WriteOnly:
    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    async def write(self, path: str, content: str) -> None:
        self.files[path] = content


class FailingBackend(MemoryBackend):
    async def write(self, path: str, content: str) -> str:
        raise OSError("disk full")


async def read(tool: Tool, ctx: DispatchContext, **args: Any) -> str:
    validated = tool.validate(args)
    out = await tool.invoke(validated, ToolContext(ToolCall("r", tool.name, args), ctx.turn, ctx))
    assert isinstance(out, str)
    return out


async def test_a_one_megabyte_single_line_gets_a_bounded_preview() -> None:
    backend = MemoryBackend()
    mw = ResultEvictionMiddleware(100, backend=backend)
    blob = "x" * 1_000_000
    ref = await evict(mw, blob, ctx=None)
    assert len(ref["preview"]) < 300
    assert "[+999800 chars]" in ref["preview"]
    assert await backend.read(ref["full_result_path"]) == blob


def test_preview_is_bounded_for_any_shape() -> None:
    many_long = "\n".join("y" * 50_000 for _ in range(100))
    shown = preview(many_long, head_lines=5, tail_lines=5, line_chars=200)
    assert len(shown) <= 11 * (200 + 32)
    assert f"... [{90 * 50_001} characters omitted] ..." in shown
    assert shown.count("\n") == 10
    assert preview("") == ""
    assert preview("a\nb\n") == "a\nb"
    eleven = "".join(f"{i}\n" for i in range(11))
    assert preview(eleven).splitlines()[5] == "... [2 characters omitted] ..."
    assert preview(eleven, tail_lines=0).splitlines() == [
        "0",
        "1",
        "2",
        "3",
        "4",
        "... [13 characters omitted] ...",
    ]
    assert preview("".join(f"{i}\n" for i in range(10))) == "\n".join(map(str, range(10)))


@pytest.mark.parametrize(
    "call_id",
    ["../../etc/passwd", "a/b\\c", "x" * 2048, "", ".", "..", "ünïcödé 🚀", "\x00nul", "a" * 48],
)
async def test_hostile_call_ids_never_escape_or_break_the_path(call_id: str) -> None:
    backend = MemoryBackend()
    mw = ResultEvictionMiddleware(10, backend=backend)
    ref = await evict(mw, "z" * 1000, call_id=call_id, ctx=None)
    path = ref["full_result_path"]
    assert normalize_virtual_path(path) == path
    assert path.startswith("large_tool_results/t1/")
    name = path.rsplit("/", 1)[1]
    assert len(name) <= 13 + 1 + 6 + 1 + 48 and ".." not in path
    assert await backend.read(path) == "z" * 1000


async def test_hostile_thread_ids_are_confined_too() -> None:
    backend = MemoryBackend()
    mw = ResultEvictionMiddleware(10, backend=backend)
    ref = await evict(mw, "z" * 100, ctx=make_ctx(thread_id="../../../root"))
    assert ref["full_result_path"].startswith("large_tool_results/")
    assert ref["full_result_path"].count("/") == 2


def test_distinct_ids_never_share_a_segment() -> None:
    assert path_segment("a/b") != path_segment("a_b")
    assert path_segment("x" * 200) != path_segment("x" * 201)
    assert path_segment("call_abc-1") == "call_abc-1"
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,48}", path_segment("../\x00" * 100))


async def test_read_tool_pages_through_the_full_result() -> None:
    backend = MemoryBackend()
    mw = ResultEvictionMiddleware(10, backend=backend, page_chars=1000)
    (tool,) = mw.tools()
    assert tool.name == READ_TOOL_NAME
    text = "".join(f"{i:05d}" for i in range(500))  # 2500 chars
    ctx = make_ctx()
    ref = await evict(mw, text, ctx=ctx)
    path = ref["full_result_path"]
    assert f'{READ_TOOL_NAME}(path="{path}", offset=0)' in ref["note"]
    page = await read(tool, ctx, path=path)
    header, body = page.split("\n", 1)
    assert body == text[:1000] and header.endswith("next offset 1000]")
    page = await read(tool, ctx, path="/" + path, offset=2000, limit=600)
    header, body = page.split("\n", 1)
    assert body == text[2000:] and header.endswith("end of result]")
    assert "past the end" in await read(tool, ctx, path=path, offset=9999)
    # Pages never exceed four default pages, whatever the model asks.
    assert len((await read(tool, ctx, path=path, limit=10**9)).split("\n", 1)[1]) == 2500


async def test_read_tool_is_confined_to_this_threads_evicted_results() -> None:
    backend = MemoryBackend({"secrets.txt": "s3cret", "large_tool_results/other/1-x": "theirs"})
    mw = ResultEvictionMiddleware(10, backend=backend)
    (tool,) = mw.tools()
    ctx = make_ctx("mine")
    for path in ("secrets.txt", "large_tool_results/other/1-x", "large_tool_results/other"):
        with pytest.raises(EvictedResultUnavailable):
            await read(tool, ctx, path=path)
    assert await read(tool, ctx, path="large_tool_results/mine") == (
        "[large_tool_results/mine: 0 files; read one by its path]\n(empty)"
    )
    with pytest.raises(ValueError, match=r"\.\."):
        await read(tool, ctx, path="large_tool_results/mine/../../secrets.txt")
    with pytest.raises(EvictedResultUnavailable, match="retention"):
        await read(tool, ctx, path="large_tool_results/mine/0000000000000-abcdef-gone")
    with pytest.raises(EvictedResultUnavailable):
        await read(tool, ctx, path="large_tool_results/mine/x", offset=-1)


async def test_read_tool_results_are_never_evicted() -> None:
    mw = ResultEvictionMiddleware(10, backend=MemoryBackend())
    call = ToolCall("r1", READ_TOOL_NAME, {})
    result = ToolResult("r1", "p" * 10_000)
    assert (await mw.after_tool_call(call, result, make_ctx())) is result


async def test_write_only_backend_gets_no_read_tool_and_a_matching_note() -> None:
    backend = WriteOnly()
    mw = ResultEvictionMiddleware(10, backend=backend)
    assert mw.tools() == ()
    ref = await evict(mw, "w" * 1000, ctx=None)
    assert backend.files[ref["full_result_path"]] == "w" * 1000
    assert READ_TOOL_NAME not in ref["note"] and "backend" in ref["note"]


async def test_write_failure_truncates_within_budget_and_emits_an_error_event() -> None:
    events: list[Event] = []
    mw = ResultEvictionMiddleware(100, backend=FailingBackend())
    blob = "HEAD" + "m" * 100_000 + "TAIL"
    call = ToolCall("c1", "fetch", {})
    out = await mw.after_tool_call(
        call, ToolResult("c1", blob, is_error=True), make_ctx(events=events)
    )
    data = out.data
    assert out.is_error and data["_truncated"] is True
    assert data["preview"].startswith("HEAD") and data["preview"].endswith("TAIL")
    assert len(data["preview"]) <= 100 * 4 // 2 + 60
    assert "OSError: disk full" in data["note"] and "middle is lost" in data["note"]
    (event,) = events
    assert isinstance(event, EvictionFailed) and isinstance(event.error, OSError)
    assert event.estimated_tokens == data["estimated_tokens"]
    # A truncation counts as already offloaded for a later eviction middleware.
    again = await ResultEvictionMiddleware(10, backend=MemoryBackend()).after_tool_call(
        call, out, make_ctx()
    )
    assert again is out


async def test_retention_keeps_at_most_max_per_thread() -> None:
    backend = MemoryBackend()
    events: list[Event] = []
    mw = ResultEvictionMiddleware(
        10, backend=backend, retention=RetentionPolicy(max_age=None, max_per_thread=2)
    )
    ctx = make_ctx(events=events)
    paths = [
        (await evict(mw, f"{i}" * 500, call_id=f"c{i}", ctx=ctx))["full_result_path"]
        for i in range(4)
    ]
    kept = await backend.ls("large_tool_results/t1")
    assert len(kept) == 2 and set(kept) <= set(paths)
    purged = [e for e in events if isinstance(e, EvictedResultsPurged)]
    assert sum(len(e.paths) for e in purged) == 2
    assert paths[-1] in kept


def test_retention_policy_by_age_and_count() -> None:
    day = 86_400.0
    now = 1_700_000_000.0
    paths = [
        f"large_tool_results/t/{int((now - age) * 1000):013d}-abcdef-c"
        for age in (3 * day, 2 * day, 10.0)
    ]
    assert written_at(paths[2]) == pytest.approx(now - 10.0)
    assert expired(paths, RetentionPolicy(max_age=day, max_per_thread=None), now=now) == paths[:2]
    assert expired(paths, RetentionPolicy(max_age=None, max_per_thread=1), now=now) == paths[:2]
    assert (
        expired([*paths, "large_tool_results/t/not-stamped"], RetentionPolicy(max_age=1.0), now=now)
        == paths
    )
    with pytest.raises(ConfigurationError):
        RetentionPolicy(max_age=0)


async def test_apply_retention_expires_old_results_in_every_thread() -> None:
    backend = MemoryBackend()
    mw = ResultEvictionMiddleware(10, backend=backend)
    for thread in ("a", "b"):
        await evict(mw, "q" * 100, ctx=make_ctx(thread))
    assert await mw.apply_retention() == []
    deleted = await mw.apply_retention(now=10**11)  # far future: everything is older than 7 days
    assert len(deleted) == 2 and await backend.ls() == []


async def test_purge_thread_deletes_only_that_thread() -> None:
    backend = MemoryBackend()
    mw = ResultEvictionMiddleware(10, backend=backend)
    for thread in ("a", "a", "b"):
        await evict(mw, "q" * 100, ctx=make_ctx(thread))
    assert len(await mw.purge_thread("a")) == 2
    assert [p.split("/")[1] for p in await backend.ls()] == ["b"]
    assert len(await purge_thread(backend, "b")) == 1


async def test_retention_failure_is_an_event_not_a_crash() -> None:
    class BrokenListing(MemoryBackend):
        async def ls(self, prefix: str = "") -> list[str]:
            raise OSError("listing unavailable")

    events: list[Event] = []
    mw = ResultEvictionMiddleware(10, backend=BrokenListing())
    ref = await evict(mw, "q" * 100, ctx=make_ctx(events=events))
    assert ref["_evicted"] is True
    assert [type(e) for e in events] == [ResultEvicted, RetentionFailed]


async def test_purging_needs_a_backend_that_can_delete() -> None:
    mw = ResultEvictionMiddleware(10, backend=WriteOnly())
    with pytest.raises(ConfigurationError, match="cannot list and delete"):
        await mw.purge_thread("t")


def test_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        ResultEvictionMiddleware(0, backend=MemoryBackend())
    with pytest.raises(ConfigurationError, match="write"):
        ResultEvictionMiddleware(backend=object())  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["local", "sqlite"])
async def test_eviction_read_back_and_retention_on_real_backends(kind: str, tmp_path: Any) -> None:
    from plait.backends import LocalBackend, SQLiteBackend

    backend: Any = LocalBackend(tmp_path) if kind == "local" else SQLiteBackend(tmp_path / "b.db")
    try:
        mw = ResultEvictionMiddleware(
            10, backend=backend, retention=RetentionPolicy(max_per_thread=1)
        )
        (tool,) = mw.tools()
        ctx = make_ctx("../odd thread")
        await evict(mw, "old" * 100, call_id="../../c0", ctx=ctx)
        ref = await evict(mw, "new" * 100, call_id="../../c1", ctx=ctx)
        page = await read(tool, ctx, path=ref["full_result_path"], limit=6)
        assert page.endswith("\nnewnew")
        assert await backend.ls("large_tool_results") == [ref["full_result_path"]]
        assert await mw.purge_thread("../odd thread") == [ref["full_result_path"]]
    finally:
        if kind == "sqlite":
            await backend.aclose()
