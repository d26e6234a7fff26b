"""The rows both trace stores write and read: :class:`TraceBatch` (one transaction's rows),
:class:`RequestRow` (a request as a delta), and the helpers that turn them into SQL values and
back (``storable_batch``, ``replay``, ``request_row``, ``run_dict``, ``span_dict``).

Shared by :mod:`plait.trace.store` (SQLite) and :mod:`plait.trace.postgres`; the SQL itself
stays with each store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.trace.parts import BinaryRow

__all__ = [
    "REQUEST_COLUMNS",
    "RUN_COLUMNS",
    "RequestRow",
    "TraceBatch",
    "escape_like",
    "replay",
    "request_row",
    "run_dict",
    "span_dict",
    "storable_batch",
]


@dataclass(slots=True)
class RequestRow:
    """One model call's request as stored: a delta (``full`` False) or whole (``full`` True).

    ``added`` holds ``[position, key]`` pairs in ascending position: replaying a delta keeps the
    previous keys not in ``removed``, in order, then inserts each added key at its position.
    """

    span_id: str
    thread_id: str
    seq: int
    full: bool
    removed: list[str]
    added: list[tuple[int, str]]
    system_hash: str
    tools_hash: str
    base_prompt_hash: str


@dataclass(slots=True)
class TraceBatch:
    """Rows to write in one transaction; the recorder fills one per flush."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    requests: list[RequestRow] = field(default_factory=list)
    messages: list[tuple[str, str, str, int, str, str | None]] = field(default_factory=list)
    blobs: dict[str, str] = field(default_factory=dict)
    binary: dict[str, BinaryRow] = field(default_factory=dict)
    """Image and file bytes by sha256: media type, size, bytes (``None``: reference only)."""

    def __bool__(self) -> bool:
        return bool(
            self.runs or self.spans or self.requests or self.messages or self.blobs or self.binary
        )

    def extend(self, later: TraceBatch) -> None:
        """Append ``later``'s rows after this batch's (one transaction for both)."""
        self.runs += later.runs
        self.spans += later.spans
        self.requests += later.requests
        self.messages += later.messages
        self.blobs.update(later.blobs)
        self.binary.update(later.binary)


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(text: str | None) -> str | None:
    if text is None or _UNSTORABLE.search(text) is None:
        return text
    return _UNSTORABLE.sub(lambda found: repr(found.group())[1:-1], text)


def storable_batch(batch: TraceBatch) -> TraceBatch:
    """``batch`` with every NUL and surrogate code point in a run's texts, a message body, a
    blob or a binary row's media type written as its escape (``\\x00``, ``\\ud800``): Postgres
    text cannot hold NUL and UTF-8 cannot encode a surrogate, and one such character would fail
    the whole transaction, losing every turn's rows merged into it. ``batch`` itself when there
    is nothing to escape (the common case; span data is JSON, already escaped)."""
    runs = [
        {k: _storable(v) if isinstance(v, str) else v for k, v in run.items()} for run in batch.runs
    ]
    messages = [(*m[:5], _storable(m[5])) for m in batch.messages]
    blobs = {digest: str(_storable(text)) for digest, text in batch.blobs.items()}
    binary = {d: (str(_storable(t)), n, b) for d, (t, n, b) in batch.binary.items()}
    same_types = all(binary[d][0] == t for d, (t, _, _) in batch.binary.items())
    if runs == batch.runs and messages == batch.messages and blobs == batch.blobs and same_types:
        return batch
    return TraceBatch(runs, batch.spans, batch.requests, messages, blobs, binary)


def replay(previous: Sequence[str], row: RequestRow) -> list[str]:
    """The message keys of ``row``'s request, given the keys of the request before it."""
    if row.full:
        return [key for _, key in row.added]
    gone = set(row.removed)
    keys = [k for k in previous if k not in gone]
    for position, key in row.added:
        keys.insert(position, key)
    return keys


def escape_like(text: str) -> str:
    """``text`` matched literally by ``LIKE … ESCAPE '\\'`` (``%`` and ``_`` are not wildcards)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def request_row(row: tuple[Any, ...]) -> RequestRow:
    """A ``trace_requests`` row (:data:`REQUEST_COLUMNS`) as a :class:`RequestRow`."""
    span_id, thread_id, seq, full, removed, added, system_hash, tools_hash, base = row
    return RequestRow(
        span_id=span_id,
        thread_id=thread_id,
        seq=seq,
        full=bool(full),
        removed=json.loads(removed),
        added=[(int(p), str(k)) for p, k in json.loads(added)],
        system_hash=system_hash,
        tools_hash=tools_hash,
        base_prompt_hash=base,
    )


REQUEST_COLUMNS = (
    "span_id, thread_id, seq, full, removed, added, system_hash, tools_hash, base_prompt_hash"
)


RUN_COLUMNS = "id, thread_id, agent, started, finished, status, error, input, output"
_RUN_KEYS = tuple(RUN_COLUMNS.split(", "))


def run_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """A run row (:data:`RUN_COLUMNS`) as the dict the views use."""
    return dict(zip(_RUN_KEYS, row, strict=True))


def span_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """A span row (id, kind, name, dispatch, started, finished, data) as a dict."""
    span_id, kind, name, dispatch, started, finished, data = row
    return {
        "id": span_id,
        "kind": kind,
        "name": name,
        "dispatch": dispatch,
        "started": started,
        "finished": finished,
        "data": json.loads(data),
    }
