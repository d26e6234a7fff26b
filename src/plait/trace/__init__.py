"""Traces of agent runs and the local page that shows them (``plait ui``).

* :class:`TraceRecorder` (middleware, opt-in; put it first) writes each turn's timeline: model
  calls with their requests stored as deltas, tool calls, middleware actions.
* :class:`SQLiteTraceStore` keeps them in SQLite (beside a SQLite thread store in the CLI);
  :class:`PostgresTraceStore` on a Postgres thread store's database (``plait[postgres]``). Both
  implement :class:`TraceStore`.
* :func:`create_app` / :func:`serve` (extra ``plait[ui]``) serve the page over a store.

See ``README.md`` in this folder for what the page shows and how the figures are computed.
"""

from __future__ import annotations

from plait.trace.postgres import PostgresTraceStore
from plait.trace.recorder import TraceRecorder
from plait.trace.server import create_app, serve
from plait.trace.store import SQLiteTraceStore, TraceStore, TraceStoreError, TraceStoreTimeoutError
from plait.trace.views import call_view, run_view

__all__ = [
    "PostgresTraceStore",
    "SQLiteTraceStore",
    "TraceRecorder",
    "TraceStore",
    "TraceStoreError",
    "TraceStoreTimeoutError",
    "call_view",
    "create_app",
    "run_view",
    "serve",
]
