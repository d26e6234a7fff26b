"""Tool call / result pairing: the one utility every strategy uses to cut or check a history.

A *pair* is an assistant message's tool call and the tool message answering it (same id). A
result answers the nearest earlier call with its id that is still open, so providers that reuse
ids (``"0"``, ``"1"`` on every response) pair correctly. Results need not be adjacent to their
call; a cut only has to keep both sides of every pair together.

* :func:`safe_cut` moves a proposed cut so that no pair straddles it.
* :func:`find_orphans` lists results without a call and calls without a result, anywhere.
* :func:`repair` returns a list without orphans: orphan results are dropped, and each call left
  without a result gets an error result saying so, placed after that call's other results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from plait.messages import AssistantMessage, Message, ToolMessage

__all__ = ["REPAIR_SOURCE", "Orphans", "find_orphans", "repair", "safe_cut"]

REPAIR_SOURCE = "plait.context.repair"
"""``metadata["source"]`` of the error results that :func:`repair` adds."""

MISSING_RESULT = "Tool call did not complete: no result was recorded for it."


@dataclass(frozen=True, slots=True)
class Orphans:
    """Where a history breaks pairing. ``results`` are indexes of tool messages with no open
    call before them; ``calls`` are ``(assistant index, call id)`` with no result after them."""

    results: tuple[int, ...] = ()
    calls: tuple[tuple[int, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.results or self.calls)


def find_orphans(messages: Sequence[Message]) -> Orphans:
    """Every orphan result and unanswered call in ``messages``: O(len)."""
    _, results, open_calls = _scan(messages)
    calls = sorted((i, cid) for cid, stack in open_calls.items() for i in stack)
    return Orphans(tuple(results), tuple(calls))


def _scan(
    messages: Sequence[Message],
) -> tuple[list[tuple[int, int]], list[int], dict[str, list[int]]]:
    """One pass pairing results with the nearest earlier open call of their id: the
    ``(call index, result index)`` of every pair, the indexes of results that answer no open
    call, and the calls left open (assistant indexes by call id)."""
    open_calls: dict[str, list[int]] = {}
    pairs: list[tuple[int, int]] = []
    orphan_results: list[int] = []
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                open_calls.setdefault(call.id, []).append(i)
        elif isinstance(m, ToolMessage):
            stack = open_calls.get(m.tool_call_id)
            if stack:
                pairs.append((stack.pop(), i))
            else:
                orphan_results.append(i)
    return pairs, orphan_results, open_calls


def repair(messages: Sequence[Message]) -> list[Message]:
    """A copy of ``messages`` with every orphan fixed (see the module docstring)."""
    orphans = find_orphans(messages)
    if not orphans:
        return list(messages)
    dropped = set(orphans.results)
    missing: dict[int, list[str]] = {}
    for index, call_id in orphans.calls:
        missing.setdefault(index, []).append(call_id)
    out: list[Message] = []
    pending: list[ToolMessage] = []
    for i, m in enumerate(messages):
        if pending and not isinstance(m, ToolMessage):
            out.extend(pending)
            pending = []
        if i in dropped:
            continue
        out.append(m)
        if i in missing and isinstance(m, AssistantMessage):
            names = {c.id: c.name for c in m.tool_calls}
            pending = [
                ToolMessage(
                    cid,
                    names.get(cid, ""),
                    MISSING_RESULT,
                    is_error=True,
                    metadata={"source": REPAIR_SOURCE},
                )
                for cid in missing[i]
            ]
    out.extend(pending)
    return out


def safe_cut(
    messages: Sequence[Message],
    cut: int,
    *,
    direction: Literal["backward", "forward"] = "backward",
) -> int:
    """The nearest index to ``cut`` where ``messages[:i]`` / ``messages[i:]`` split no pair.

    ``backward`` (keep more of the tail) returns the largest such ``i <= cut``; it walks back
    from the end and costs O(len - i). ``forward`` (drop more) returns the smallest ``i >= cut``.
    A result whose call exists nowhere is an orphan, not a pair, and never moves the cut.
    ``0`` and ``len(messages)`` are always safe.
    """
    n = len(messages)
    cut = max(0, min(cut, n))
    if direction == "forward":
        return _forward(messages, cut)
    if cut == n:
        return n
    found = _backward(messages, cut, frozenset())
    if found is not None:
        return found
    # Reaching the start with results still unmatched means those results have no call at all.
    return _backward(messages, cut, frozenset(find_orphans(messages).results)) or 0


def _backward(messages: Sequence[Message], cut: int, ignore: frozenset[int]) -> int | None:
    unmatched: Counter[str] = Counter()
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, ToolMessage):
            if i not in ignore:
                unmatched[m.tool_call_id] += 1
        elif isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                if unmatched[call.id] > 0:
                    unmatched[call.id] -= 1
                    if not unmatched[call.id]:
                        del unmatched[call.id]
        if i <= cut and not unmatched:
            return i
    return None


def _forward(messages: Sequence[Message], cut: int) -> int:
    pairs, _, _ = _scan(messages)
    # Sorted by call position, one pass suffices: the cut only moves forward.
    for start, end in sorted(pairs):
        if start < cut <= end:
            cut = end + 1
    return cut
