"""Typed events of the context battery, emitted through ``TurnContext.emit`` so a CLI or a UI
can show what was evicted, summarized, offloaded or deleted, and what failed.

Failures that the battery recovers from (a backend write that failed, a summarizer that raised)
are events, never silent: the turn continues and the event says what was done instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plait.middleware.context import Event

__all__ = [
    "ContextOverflowRecovered",
    "EvictedResultsPurged",
    "EvictionFailed",
    "HistoryOffloadFailed",
    "HistoryOffloaded",
    "HistorySummarized",
    "ResultEvicted",
    "RetentionFailed",
    "SummarizerFailed",
]


@dataclass(slots=True, kw_only=True)
class ResultEvicted(Event):
    """A tool result was written to ``path`` and replaced by a reference with a preview."""

    tool: str
    call_id: str
    path: str
    estimated_tokens: int
    chars: int
    type: str = "result_evicted"


@dataclass(slots=True, kw_only=True)
class EvictionFailed(Event):
    """Writing an oversized result failed; the model got a bounded truncation instead."""

    tool: str
    call_id: str
    path: str
    estimated_tokens: int
    error: BaseException
    type: str = "eviction_failed"


@dataclass(slots=True, kw_only=True)
class EvictedResultsPurged(Event):
    """The retention policy deleted evicted results (oldest first)."""

    thread_id: str
    paths: list[str] = field(default_factory=list)
    type: str = "evicted_results_purged"


@dataclass(slots=True, kw_only=True)
class RetentionFailed(Event):
    """Listing or deleting old evicted results failed; they stay until the next sweep."""

    thread_id: str
    error: BaseException
    type: str = "retention_failed"


@dataclass(slots=True, kw_only=True)
class HistorySummarized(Event):
    """A summarization pass ran: ``messages_removed`` older messages were folded into the
    summary, which now covers the first ``covered`` messages of the thread."""

    thread_id: str
    original_tokens: int
    summarized_tokens: int
    messages_removed: int
    covered: int
    summarizer: str
    forced: bool = False
    type: str = "history_summarized"


@dataclass(slots=True, kw_only=True)
class SummarizerFailed(Event):
    """The configured summarizer raised; the extractive summary was used instead."""

    summarizer: str
    error: BaseException
    type: str = "summarizer_failed"


@dataclass(slots=True, kw_only=True)
class HistoryOffloaded(Event):
    """The messages a summarization pass folded were written to ``path`` (in the background)."""

    thread_id: str
    path: str
    messages: int
    type: str = "history_offloaded"


@dataclass(slots=True, kw_only=True)
class HistoryOffloadFailed(Event):
    """The best-effort history offload failed; the summary and the thread store are unaffected
    (the thread store always keeps the raw history)."""

    thread_id: str
    path: str
    error: BaseException
    type: str = "history_offload_failed"


@dataclass(slots=True, kw_only=True)
class ContextOverflowRecovered(Event):
    """The provider rejected a request as too long; it was compacted and sent once more."""

    original_tokens: int
    compacted_tokens: int
    summarized: bool
    evicted: int
    type: str = "context_overflow_recovered"
