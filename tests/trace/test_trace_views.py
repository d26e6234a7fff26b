"""The figures the page shows, computed from the demo's recorded trace: waterfall sums, the
context diff of the eviction and summarization steps, and where a request's tokens went."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plait.trace import SQLiteTraceStore, call_view, run_view
from plait.trace.views import BREAKDOWN_PARTS, USAGE_FIELDS


async def _first_turn(path: Path) -> tuple[SQLiteTraceStore, dict[str, Any]]:
    store = SQLiteTraceStore(path)
    runs = await store.runs()
    assert [r["input"] for r in runs] == [
        "Draft a one-line note for the team about it.",
        "Which region sold the most units?",
        "What is in sales.csv?",
    ]
    view = await run_view(store, runs[-1]["id"])
    assert view is not None
    return store, view


def _spans(view: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [s for d in view["dispatches"] for s in d["spans"] if s["kind"] == kind]


async def test_parents_sum_their_children(demo_traces: Path) -> None:
    store, view = await _first_turn(demo_traces)
    for dispatch in view["dispatches"]:
        models = [s for s in dispatch["spans"] if s["kind"] == "model"]
        for field in USAGE_FIELDS:
            assert dispatch["usage"][field] == sum(s["usage"][field] for s in models)
    for field in USAGE_FIELDS:
        assert view["usage"][field] == sum(d["usage"][field] for d in view["dispatches"])
    assert view["usage"]["input"] > 0 and view["model_calls"] == len(_spans(view, "model"))
    assert [s["name"] for s in _spans(view, "tool")] == [
        "read_file",
        "csv_rows",
        "read_evicted_result",
    ]
    await store.aclose()


async def test_context_diff_shows_the_eviction_and_the_summary(demo_traces: Path) -> None:
    store, view = await _first_turn(demo_traces)
    diffs = []
    for span in _spans(view, "model"):
        call = await call_view(store, span["id"])
        assert call is not None
        diffs.append(call["diff"])
    assert diffs[0]["first"] is True
    changes = [{(i["change"], i["what"]) for i in d["items"]} for d in diffs]
    assert ("disclosed", "tool csv_rows") in changes[1]
    evicted = next(i for d in diffs for i in d["items"] if i["change"] == "evicted")
    assert evicted["what"] == "result of csv_rows" and evicted["original_tokens"] > 9_000
    assert evicted["full_result_path"].startswith("large_tool_results/demo/")
    summarized = next(d for d in diffs if any(i["change"] == "summarized" for i in d["items"]))
    folded = [i for i in summarized["items"] if i["change"] == "summarized"]
    assert any(i["tokens"] < 0 for i in folded) and any(i["tokens"] > 0 for i in folded)
    assert any(i["what"].startswith("system: Summary of the earlier") for i in folded)
    assert any(("withdrawn", "tool csv_rows") in c for c in changes)
    for d in diffs:
        assert d["delta"] == sum(i["tokens"] for i in d["items"])
    await store.aclose()


async def test_breakdown_accounts_for_every_estimated_token(demo_traces: Path) -> None:
    store, view = await _first_turn(demo_traces)
    for span in _spans(view, "model"):
        call = await call_view(store, span["id"])
        assert call is not None
        parts = {p["part"]: p["tokens"] for p in call["breakdown"]}
        assert list(parts) == list(BREAKDOWN_PARTS)
        assert sum(parts.values()) == span["data"]["estimated_input_tokens"]
        assert parts["skill catalog"] > 0 and parts["tool definitions"] > 0
    await store.aclose()
