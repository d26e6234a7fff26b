"""What the trace page tests share: the Chromium binary and flags, the demo's price table, and
the objects the fixtures in ``tests/trace/conftest.py`` yield."""

from __future__ import annotations

from typing import Any

from plait.trace import SQLiteTraceStore

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DEMO_PRICES = {"scripted-demo": {"input": 2.0, "output": 8.0, "cache_read": 0.5}}


class Served:
    def __init__(self, url: str, store: SQLiteTraceStore) -> None:
        self.url = url
        self.store = store


class Browser:
    """A Chromium page plus every URL it requested.

    Module-scoped: Playwright's sync API keeps an event loop running in this thread while it is
    open, which would stop later async tests from starting theirs."""

    def __init__(self, page: Any, requests: list[str]) -> None:
        self.page = page
        self.requests = requests
