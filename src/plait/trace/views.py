"""What the trace page shows, computed from a trace store: JSON-ready dicts, no HTML.

* :func:`run_view`: a run, its spans grouped by dispatch, and token totals in which every parent
  is the sum of its children (dispatch = its model calls, run = its dispatches); its pause and
  resume (:func:`~plait.trace.pauses.pause_view`: held calls, decisions, the linked run), its
  subagents and the tree's usage (:func:`~plait.trace.tree.tree_view`), and the model calls
  whose prompt-cache prefix broke (``cache_breaks``).
* :func:`call_view`: one model call read as a conversation (messages, projected ones by
  reference), the tools it offered and the calls made against them, where its input tokens went,
  and the context diff against the thread's previous model call.

Image and file parts are shown by reference: each source ``{"sha256", "size"}`` gains
``kept`` (whether the trace store holds its bytes, served at ``/api/blobs/<sha256>``).

Token figures for parts of a request are estimates (``CHARS_PER_TOKEN`` characters per token plus
a small per-item overhead); the usage a provider reported is shown as reported.
"""

from __future__ import annotations

import json
from typing import Any

from plait.tokens import CHARS_PER_TOKEN, tool_tokens
from plait.tools import ToolDefinition
from plait.trace.pauses import pause_view
from plait.trace.store import TraceStore
from plait.trace.tree import tree_view

__all__ = ["BREAKDOWN_PARTS", "USAGE_FIELDS", "call_view", "run_view"]

USAGE_FIELDS = ("input", "output", "cache_read", "cache_write", "reasoning")
"""The usage figures summed from model calls up to dispatches and runs (``reasoning`` is part of
``output``, as the provider reported it)."""

BREAKDOWN_PARTS = (
    "system prompt",
    "skill catalog",
    "pinned/projected skills",
    "history",
    "summaries",
    "tool results",
    "tool definitions",
)
"""Where the input tokens of one request go, in display order."""

_PART_OF_KIND = {
    "projected": "pinned/projected skills",
    "summary": "summaries",
    "tool_result": "tool results",
    "evicted": "tool results",
}


def _tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _usage(span: dict[str, Any]) -> dict[str, int]:
    reported = span["data"].get("usage") or {}
    return {f: int(reported.get(f, 0)) for f in USAGE_FIELDS}


def _sum(parts: list[dict[str, int]]) -> dict[str, int]:
    return {f: sum(p[f] for p in parts) for f in USAGE_FIELDS}


async def run_view(store: TraceStore, run_id: str) -> dict[str, Any] | None:
    """The run ``run_id`` with its dispatches (each: spans in start order, usage, start, end),
    per-model usage, and run totals; ``None`` if the run is unknown."""
    found = await store.run(run_id)
    if found is None:
        return None
    run, spans = found
    dispatches: dict[int, list[dict[str, Any]]] = {}
    for span in spans:
        dispatches.setdefault(span["dispatch"], []).append(span)
    groups = []
    for index in sorted(dispatches):
        members = dispatches[index]
        for span in members:
            span["usage"] = _usage(span)
        groups.append(
            {
                "index": index,
                "started": min(s["started"] for s in members),
                "finished": max(s["finished"] for s in members),
                "usage": _sum([s["usage"] for s in members if s["kind"] == "model"]),
                "spans": members,
            }
        )
    await _mark_kept(store, [p for s in spans if s["kind"] == "tool" for p in _refs(s["data"])])
    models: dict[str, list[dict[str, int]]] = {}
    for span in spans:
        if span["kind"] == "model":
            models.setdefault(span["name"], []).append(span["usage"])
    usage = _sum([g["usage"] for g in groups])
    return {
        "run": run,
        "dispatches": groups,
        "usage": usage,
        "pause": await pause_view(store, run, spans),
        "cache_breaks": [
            {"span_id": s["id"], "dispatch": s["dispatch"], **s["data"]["cache_broken"]}
            for s in spans
            if s["kind"] == "model" and isinstance(s["data"].get("cache_broken"), dict)
        ],
        **tree_view(spans, usage),
        "models": {name: _sum(parts) | {"calls": len(parts)} for name, parts in models.items()},
        "model_calls": sum(1 for s in spans if s["kind"] == "model"),
        "tool_calls": sum(1 for s in spans if s["kind"] == "tool"),
        "actions": sum(1 for s in spans if s["kind"] == "action"),
    }


async def call_view(store: TraceStore, span_id: str) -> dict[str, Any] | None:
    """Model call ``span_id`` as the page shows it (see the module docstring), or ``None``."""
    found = await store.request(span_id)
    if found is None:
        return None
    row, keys, previous = found
    previous_keys: list[str] = []
    previous_tools: list[dict[str, Any]] = []
    previous_system = ""
    if previous is not None:
        before = await store.request(previous.span_id)
        previous_keys = before[1] if before is not None else []
        previous_tools = json.loads(await store.blob(previous.tools_hash) or "[]")
        previous_system = await store.blob(previous.system_hash) or ""
    stored = await store.messages(row.thread_id, [*keys, *previous_keys])
    system = await store.blob(row.system_hash) or ""
    base = await store.blob(row.base_prompt_hash) or ""
    tools: list[dict[str, Any]] = json.loads(await store.blob(row.tools_hash) or "[]")
    for definition in tools:
        definition["tokens"] = _tool_tokens(definition)
    messages = [stored.get(k) or _missing(k) for k in keys]
    await _mark_kept(store, [p for m in messages for p in _refs(m.get("body"))])
    return {
        "span_id": span_id,
        "thread_id": row.thread_id,
        "seq": row.seq,
        "system_prompt": system,
        "messages": messages,
        "tools": tools,
        "breakdown": _breakdown(system, base, messages, tools),
        "diff": _diff(
            previous is not None,
            [stored.get(k) or _missing(k) for k in previous_keys],
            messages,
            (previous_system, system),
            (previous_tools, tools),
        ),
    }


def _refs(holder: Any) -> list[dict[str, Any]]:
    """The image and file parts of a message body or a tool span's data, as stored."""
    if not isinstance(holder, dict):
        return []
    found = []
    for key in ("content", "parts"):
        for part in holder.get(key) or []:
            is_blob = isinstance(part, dict) and part.get("type") in ("image", "file")
            if is_blob and isinstance(part.get("source"), dict):
                found.append(part)
    return found


async def _mark_kept(store: TraceStore, parts: list[dict[str, Any]]) -> None:
    """Set ``kept`` on each part's source: whether the store holds its bytes."""
    if not parts:
        return
    kept = await store.binary_kept(sorted({str(p["source"].get("sha256")) for p in parts}))
    for part in parts:
        part["source"]["kept"] = kept.get(str(part["source"].get("sha256")), False)


def _missing(key: str) -> dict[str, Any]:
    return {"key": key, "role": "?", "tokens": 0, "kind": "missing", "body": None}


def _tool_tokens(definition: dict[str, Any]) -> int:
    return tool_tokens(
        ToolDefinition(
            name=str(definition.get("name", "")),
            description=str(definition.get("description", "")),
            parameters=definition.get("parameters") or {},
        )
    )


def _breakdown(
    system: str, base: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    parts = dict.fromkeys(BREAKDOWN_PARTS, 0)
    if base and base in system:
        parts["system prompt"] = _tokens(base)
        parts["skill catalog"] = _tokens(system) - _tokens(base)
    else:
        parts["system prompt"] = _tokens(system)
    for message in messages:
        parts[_PART_OF_KIND.get(message["kind"], "history")] += int(message["tokens"])
    parts["tool definitions"] = sum(int(t["tokens"]) for t in tools)
    return [{"part": name, "tokens": tokens} for name, tokens in parts.items()]


def _message_label(message: dict[str, Any]) -> str:
    body = message.get("body")
    if message["kind"] == "projected":
        return f"{message['role']} message (projected; shown by reference)"
    if not isinstance(body, dict):
        return f"{message['role']} message"
    if body.get("role") == "tool":
        return f"result of {body.get('name', '?')}"
    content = [p for p in body.get("content") or [] if isinstance(p, dict)]
    text = " ".join(str(p.get("text", "")) for p in content if p.get("type", "text") == "text")
    if not text:  # an image or file alone: name it
        shown = [p for p in content if p.get("type") in ("image", "file")]
        text = " ".join(f"[{p['type']} {p.get('media_type') or ''}]" for p in shown)
    calls = [c.get("name", "?") for c in body.get("tool_calls") or []]
    label = text[:80] or (f"calls {', '.join(calls)}" if calls else "")
    return f"{message['role']}: {label}"


def _diff(
    has_previous: bool,
    old: list[dict[str, Any]],
    new: list[dict[str, Any]],
    systems: tuple[str, str],
    tools: tuple[list[dict[str, Any]], list[dict[str, Any]]],
) -> dict[str, Any]:
    """The changes from the previous request to this one, each with its token delta."""
    items: list[dict[str, Any]] = []
    old_keys = {m["key"] for m in old}
    new_keys = {m["key"] for m in new}
    removed = [m for m in old if m["key"] not in new_keys]
    added = [m for m in new if m["key"] not in old_keys]
    added_ids = {m["key"].split(":")[0]: m for m in added}
    summarized = any(m["kind"] == "summary" for m in added)
    for message in removed:
        replacement = added_ids.pop(message["key"].split(":")[0], None)
        if replacement is not None:
            change = "evicted" if replacement["kind"] == "evicted" else "changed"
            delta = int(replacement["tokens"]) - int(message["tokens"])
            items.append(_item(change, _message_label(replacement), delta))
            added = [m for m in added if m is not replacement]
            continue
        if message["kind"] == "projected":
            change = "withdrawn"
        else:
            change = "summarized" if summarized else "removed"
        items.append(_item(change, _message_label(message), -int(message["tokens"])))
    for message in added:
        change = {
            "projected": "disclosed",
            "summary": "summarized",
            "evicted": "evicted",
        }.get(message["kind"], "added")
        item = _item(change, _message_label(message), int(message["tokens"]))
        body = message.get("body")
        if change == "evicted" and isinstance(body, dict) and isinstance(body.get("data"), dict):
            item["original_tokens"] = body["data"].get("estimated_tokens")
            item["full_result_path"] = body["data"].get("full_result_path")
        items.append(item)
    before = {t["name"]: t for t in tools[0]}
    after = {t["name"]: t for t in tools[1]}
    for name in after.keys() - before.keys():
        items.append(_item("disclosed", f"tool {name}", _tool_tokens(after[name])))
    for name in before.keys() - after.keys():
        items.append(_item("withdrawn", f"tool {name}", -_tool_tokens(before[name])))
    if has_previous and systems[0] != systems[1]:
        items.append(_item("changed", "system prompt", _tokens(systems[1]) - _tokens(systems[0])))
    return {
        "first": not has_previous,
        "items": items,
        "delta": sum(int(i["tokens"]) for i in items),
    }


def _item(change: str, what: str, tokens: int) -> dict[str, Any]:
    return {"change": change, "what": what, "tokens": tokens}
