"""What the trace page tests share: the Chromium binary and flags, the demo's price table, the
token the served pages ask for (:data:`TOKEN`), the objects the fixtures in
``tests/trace/conftest.py`` yield, and :func:`serve` (a page app on 127.0.0.1 in a uvicorn
thread)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from plait.trace import SQLiteTraceStore
from plait.trace.access import new_token
from plait.trace.server import free_port

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
TOKEN = new_token()
"""The token of the apps the trace tests serve (``create_app(..., token=TOKEN)``)."""


def read(url: str) -> bytes:
    """``GET url`` with the test token as ``Authorization: Bearer``; the body."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return bytes(response.read())


def read_json(url: str) -> Any:
    return json.loads(read(url))


class Served:
    def __init__(self, url: str, store: SQLiteTraceStore) -> None:
        self.url = url
        self.store = store
        self.page_url = f"{url}/?token={TOKEN}"
        """The page's address as plait ui prints it (the token in the query)."""


@contextlib.contextmanager
def serve(app: ASGIApp, store: SQLiteTraceStore) -> Iterator[Served]:
    """Serve ``app`` on a free 127.0.0.1 port in a uvicorn thread until the block ends; fails
    if the server has not started within 20 s."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start within 20 s")
        time.sleep(0.05)
    try:
        yield Served(f"http://127.0.0.1:{port}", store)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class Browser:
    """A Chromium page plus every URL it requested.

    Module-scoped: Playwright's sync API keeps an event loop running in this thread while it is
    open, which would stop later async tests from starting theirs."""

    def __init__(self, page: Any, requests: list[str], console: list[str]) -> None:
        self.page = page
        self.requests = requests
        self.console = console
        """Every console message of the page (a CSP violation is one)."""
