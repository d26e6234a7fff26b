"""Context management: keep requests inside the model's window without losing anything.

Strategies (one file each; see README.md for when to use which):

* :class:`ResultEvictionMiddleware` — oversized tool results go to a backend; a reference with a
  preview stays, and ``read_evicted_result`` pages the rest back.
* :class:`SummarizationMiddleware` — older turns become one summary system message.
* :class:`OverflowRecoveryMiddleware` — on ``ContextOverflowError``, compact and retry once.

Shared helpers: :mod:`~plait.tokens` (estimates and accounting, a lower layer the guards
use too),
:mod:`~plait.context.pairs` (tool call/result pair safety), :mod:`~plait.context.offload`
(paths, previews, references), :mod:`~plait.context.retention`,
:mod:`~plait.context.summarizers`, :mod:`~plait.context.events`.
"""

from plait.context.events import (
    ContextOverflowRecovered,
    EvictedResultsPurged,
    EvictionFailed,
    HistoryOffloaded,
    HistoryOffloadFailed,
    HistorySummarized,
    ResultEvicted,
    RetentionFailed,
    SummarizerFailed,
)
from plait.context.eviction import EvictedResultUnavailable, ResultEvictionMiddleware
from plait.context.overflow import ContextOverflowUnrecoverable, OverflowRecoveryMiddleware
from plait.context.pairs import Orphans, find_orphans, repair, safe_cut
from plait.context.retention import RetentionPolicy, apply_retention, purge_thread
from plait.context.summarization import (
    SummarizationInfo,
    SummarizationMiddleware,
    SummaryRecord,
)
from plait.context.summarizers import (
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    SummarizerError,
)
from plait.tokens import (
    CHARS_PER_TOKEN,
    CharEstimator,
    TiktokenCounter,
    TokenAccountant,
    TokenCounter,
    TokenizerUnavailable,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "CharEstimator",
    "ContextOverflowRecovered",
    "ContextOverflowUnrecoverable",
    "EvictedResultUnavailable",
    "EvictedResultsPurged",
    "EvictionFailed",
    "ExtractiveSummarizer",
    "HistoryOffloadFailed",
    "HistoryOffloaded",
    "HistorySummarized",
    "ModelSummarizer",
    "Orphans",
    "OverflowRecoveryMiddleware",
    "ResultEvicted",
    "ResultEvictionMiddleware",
    "RetentionFailed",
    "RetentionPolicy",
    "SummarizationInfo",
    "SummarizationMiddleware",
    "Summarizer",
    "SummarizerError",
    "SummarizerFailed",
    "SummaryRecord",
    "TiktokenCounter",
    "TokenAccountant",
    "TokenCounter",
    "TokenizerUnavailable",
    "apply_retention",
    "find_orphans",
    "purge_thread",
    "repair",
    "safe_cut",
]
