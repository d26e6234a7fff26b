"""What every strategy that moves content out of the context window shares: backend paths,
bounded previews, and the reference objects that replace an oversized result.

Paths are built only from sanitized segments, so a hostile or 2 KB tool-call id (or thread id)
can neither escape the root nor exceed a filesystem's name limit:

    large_tool_results/<thread>/<unix ms>-<6 hex>-<call id>     an evicted result
    conversation_history/<thread>/<first>-<end>.json            messages a summary folded

The leading timestamp lets the retention policy expire results by age from a listing alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from plait.backends.base import BackendWriteSurface
from plait.context.events import (
    EvictionFailed,
    HistoryOffloaded,
    HistoryOffloadFailed,
    ResultEvicted,
)
from plait.messages import Message, ToolMessage, dump_messages
from plait.middleware.context import EventSink, PersistFilter
from plait.paths import normalize_virtual_path

__all__ = [
    "EVICTED_ROOT",
    "HISTORY_ROOT",
    "READ_TOOL_NAME",
    "evicted_path",
    "eviction_reference",
    "head_tail",
    "history_path",
    "is_offloaded",
    "offload_result",
    "path_segment",
    "persistable",
    "preview",
    "serialize_result",
    "thread_prefix",
    "truncation_reference",
    "write_history",
    "written_at",
]

EVICTED_ROOT: Final = "large_tool_results"
READ_TOOL_NAME: Final = "read_evicted_result"
"""The tool :class:`~plait.context.ResultEvictionMiddleware` contributes to read results back."""
HISTORY_ROOT: Final = "conversation_history"
MAX_SEGMENT_CHARS: Final = 48

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_STAMP = re.compile(r"^(\d{13})-")
_HASHED = re.compile(r"(?:^|-)[0-9a-f]{16}$")


def path_segment(value: str, *, max_chars: int = MAX_SEGMENT_CHARS) -> str:
    """``value`` as one safe path segment: ``[A-Za-z0-9_-]`` only, at most ``max_chars``.

    A value that had to change (or was too long) gets a hash suffix, so two different ids never
    share a segment (``a/b`` and ``a_b`` stay apart). A value that already ends like such a
    suffix is hashed too, or the thread ``path_segment(x)`` would share the folder of thread
    ``x`` (and read its evicted results).
    """
    cleaned = _UNSAFE.sub("_", value)
    if cleaned == value and 0 < len(value) <= max_chars and not _HASHED.search(value):
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    head = cleaned[: max(0, max_chars - len(digest) - 1)]
    return f"{head}-{digest}" if head else digest


def thread_prefix(root: str, thread_id: str) -> str:
    """The folder holding everything written for ``thread_id`` under ``root``."""
    return f"{normalize_virtual_path(root)}/{path_segment(thread_id)}"


_last_stamp = 0


def evicted_path(root: str, thread_id: str, call_id: str, *, now: float | None = None) -> str:
    """A fresh path for one evicted result (unique even when a provider reuses call ids).

    Stamps strictly increase within a process, so name order is write order and retention
    never mistakes the newest result for an older one written in the same millisecond.
    """
    global _last_stamp
    stamp = int((time.time() if now is None else now) * 1000)
    if now is None:
        stamp = _last_stamp = max(stamp, _last_stamp + 1)
    name = f"{stamp:013d}-{secrets.token_hex(3)}-{path_segment(call_id)}"
    return f"{thread_prefix(root, thread_id)}/{name}"


def history_path(root: str, thread_id: str, start: int, end: int) -> str:
    """Where the thread messages ``[start, end)`` folded by one summarization pass go."""
    return f"{thread_prefix(root, thread_id)}/{start:08d}-{end:08d}.json"


def written_at(path: str) -> float | None:
    """The write time (seconds) encoded in an evicted result's name, or ``None``."""
    match = _STAMP.match(path.rsplit("/", 1)[-1])
    return int(match.group(1)) / 1000 if match else None


def serialize_result(data: Any) -> str:
    """A tool result's data as the text that is stored and estimated (strings unchanged)."""
    if isinstance(data, str):
        return data
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def is_offloaded(data: Any) -> bool:
    """Whether ``data`` is already a reference or a truncation made by an offloading step."""
    return isinstance(data, dict) and (
        "_evicted" in data or "full_result_path" in data or data.get("_truncated") is True
    )


def _clip(text: str, start: int, end: int, limit: int) -> str:
    if end - start <= limit:
        return text[start:end]
    return f"{text[start : start + limit]}… [+{end - start - limit} chars]"


def preview(text: str, *, head_lines: int = 5, tail_lines: int = 5, line_chars: int = 200) -> str:
    """The first ``head_lines`` and last ``tail_lines`` lines, each clipped to ``line_chars``,
    around a ``... [N characters omitted] ...`` marker (no marker if every line is shown).

    Bounded by ``(head_lines + tail_lines + 1) * (line_chars + 32)`` characters whatever the
    input, and never scans more than the lines it shows: a 10 MB result costs about as much as
    copying a few of its lines (counting all its lines alone would cost more than writing it).
    """
    lines, ends = _head(text, head_lines + tail_lines, line_chars)
    if not ends or ends[-1] >= len(text):
        return "\n".join(lines)
    head_end = ends[head_lines - 1] if head_lines else 0
    tail, tail_start = _tail(text, tail_lines, line_chars)
    omitted = max(0, tail_start - head_end)
    return "\n".join([*lines[:head_lines], f"... [{omitted} characters omitted] ...", *tail])


def _head(text: str, count: int, line_chars: int) -> tuple[list[str], list[int]]:
    """Up to ``count`` clipped lines from the start, and where each line's successor starts."""
    lines: list[str] = []
    ends: list[int] = []
    pos = 0
    while len(lines) < count and pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        lines.append(_clip(text, pos, end, line_chars))
        pos = end + 1
        ends.append(pos)
    return lines, ends


def _tail(text: str, count: int, line_chars: int) -> tuple[list[str], int]:
    """Up to ``count`` clipped lines from the end, and where the first of them starts."""
    lines: list[str] = []
    end = len(text) - 1 if text.endswith("\n") else len(text)
    start = len(text)
    while len(lines) < count and end >= 0:
        start = text.rfind("\n", 0, end) + 1
        lines.append(_clip(text, start, end, line_chars))
        end = start - 1
    return lines[::-1], start


def head_tail(text: str, max_chars: int) -> str:
    """``text`` itself if it fits ``max_chars``, else its start and end around a marker."""
    if len(text) <= max_chars:
        return text
    head = max_chars // 2
    tail = max_chars - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n... [{omitted} characters omitted] ...\n{text[len(text) - tail :]}"


def eviction_reference(
    *, text: str, path: str, estimated_tokens: int, preview_text: str, reader: str | None
) -> dict[str, Any]:
    """The seed's reference object: ``{_evicted, preview, full_result_path, estimated_tokens,
    note}``. The note says how large the result is and how to read it back."""
    how = (
        f'Read it in pages with {reader}(path="{path}", offset=0); each page gives the next '
        "offset. Read only what you need."
        if reader
        else "Retrieve it from the backend at that path if you need more than the preview."
    )
    note = (
        f"The result was too large for the context ({estimated_tokens} estimated tokens, "
        f"{len(text)} characters) and was saved to {path}. The preview shows its first and "
        f"last lines; long lines are clipped. {how}"
    )
    return {
        "_evicted": True,
        "preview": preview_text,
        "full_result_path": path,
        "estimated_tokens": estimated_tokens,
        "note": note,
    }


def truncation_reference(
    *, text: str, estimated_tokens: int, max_chars: int, reason: str
) -> dict[str, Any]:
    """What replaces an oversized result that is not kept anywhere: its start and end, bounded by
    ``max_chars``, and a note that says why (``reason``) and that the middle is lost."""
    return {
        "_truncated": True,
        "preview": head_tail(text, max_chars),
        "estimated_tokens": estimated_tokens,
        "note": (
            f"The result was too large for the context ({estimated_tokens} estimated tokens, "
            f"{len(text)} characters) and {reason}, so only its start and end are shown; the "
            "middle is lost. Call the tool again with narrower arguments if you need it."
        ),
    }


async def offload_result(
    backend: BackendWriteSurface | None,
    *,
    text: str,
    estimated_tokens: int,
    tool: str,
    call_id: str,
    path: str,
    budget_chars: int,
    preview_text: Callable[[str], str],
    reader: str | None,
    emit: EventSink,
) -> tuple[dict[str, Any], bool]:
    """Move an oversized result's ``text`` out of the context: write it to ``path`` and return
    ``(eviction reference, True)`` after a ``ResultEvicted`` event; or, without a backend or when
    the write fails (an ``EvictionFailed`` event), ``(truncation reference, False)`` whose
    preview keeps at most ``budget_chars`` of the start and end. Never raises for the write."""
    if backend is None:
        reason = "was cut to fit the model's context window"
        return truncation_reference(
            text=text, estimated_tokens=estimated_tokens, max_chars=budget_chars, reason=reason
        ), False
    try:
        await backend.write(path, text)
    except Exception as exc:
        emit(
            EvictionFailed(
                tool=tool, call_id=call_id, path=path, estimated_tokens=estimated_tokens, error=exc
            )
        )
        reason = f"could not be saved ({type(exc).__name__}: {exc})"
        return truncation_reference(
            text=text, estimated_tokens=estimated_tokens, max_chars=budget_chars, reason=reason
        ), False
    emit(
        ResultEvicted(
            tool=tool,
            call_id=call_id,
            path=path,
            estimated_tokens=estimated_tokens,
            chars=len(text),
        )
    )
    reference = eviction_reference(
        text=text,
        path=path,
        estimated_tokens=estimated_tokens,
        preview_text=preview_text(text),
        reader=reader,
    )
    return reference, True


async def write_history(
    backend: BackendWriteSurface,
    path: str,
    messages: Sequence[Message],
    thread_id: str,
    emit: EventSink,
) -> None:
    """Write ``messages`` as JSON (:func:`~plait.messages.dump_messages`) to ``path``; meant to
    run as a background task. Serialization happens in a worker thread; the outcome is an event
    (``HistoryOffloaded`` or ``HistoryOffloadFailed``), never an exception. Cancelled (a
    ``drain`` deadline, the loop shutting down), it reports ``HistoryOffloadFailed`` with the
    cancellation as the error, then lets the cancellation through."""
    try:
        payload = await asyncio.to_thread(dump_messages, messages)
        await backend.write(path, payload)
    except asyncio.CancelledError as exc:
        emit(HistoryOffloadFailed(thread_id=thread_id, path=path, error=exc))
        raise
    except Exception as exc:
        emit(HistoryOffloadFailed(thread_id=thread_id, path=path, error=exc))
        return
    emit(HistoryOffloaded(thread_id=thread_id, path=path, messages=len(messages)))


def persistable(message: ToolMessage, filters: Sequence[PersistFilter]) -> bool:
    """Whether ``message`` would be written to the store as it is: no persist filter rewrites it.

    A rewritten result is projected content (a managed skill's body read): offloading it would
    write it through a backend and put its preview in the request, so strategies leave it alone.
    """
    kept: list[Message] = [message]
    for keep_out in filters:
        kept = keep_out(kept)
    return kept == [message]
