"""The example AG-UI page (``examples/serve_agui/index.html``) in headless Chromium, talking to a
real ``plait serve`` process on another origin (allowed by ``--cors``)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_process import ServeProcess, serve_process
from trace_page import CHROMIUM, CHROMIUM_ARGS

from plait.trace.access import new_token
from plait.trace.server import free_port

PAGE = Path(__file__).parents[2] / "examples" / "serve_agui"


@contextlib.contextmanager
def static_site(folder: Path) -> Iterator[str]:
    port = free_port()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    site = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        site.shutdown()
        site.server_close()


@pytest.fixture(scope="module")
def page_and_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ServeProcess]]:
    with static_site(PAGE) as site:
        folder = tmp_path_factory.mktemp("browser")
        with serve_process(folder, token=new_token(), args=("--cors", site)) as served:
            yield site, served


def test_the_example_page_chats_over_agui(
    page_and_server: tuple[str, ServeProcess], tmp_path: Path
) -> None:
    from playwright.sync_api import Dialog, sync_playwright

    site, server = page_and_server
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = context.new_page()
            page.set_default_timeout(20_000)
            page.goto(f"{site}/index.html#server={server.url}&token={server.token}")
            page.fill("#input", "add 2 3")
            page.click("#send")
            page.wait_for_function("document.getElementById('status').textContent === 'finished'")
            transcript = page.inner_text("#transcript")
            assert "tool: add" in transcript and "→ 5" in transcript and "sum: 5" in transcript
            page.fill("#input", "hello")
            page.click("#send")
            page.wait_for_function(
                "document.getElementById('transcript').innerText.includes('echo: hello')"
            )
            page.wait_for_function("document.getElementById('status').textContent === 'finished'")
            events = page.inner_text("#events").split()
            assert events[0] == "RUN_STARTED" and events[-1] == "RUN_FINISHED"
            assert "TEXT_MESSAGE_CONTENT" in events

            # A frontend tool: the page runs `confirm` (the user accepts), the run goes on.
            questions: list[str] = []

            def answer(dialog: Dialog) -> None:
                questions.append(dialog.message)
                dialog.accept()

            page.on("dialog", answer)
            page.fill("#input", "client confirm")
            page.click("#send")
            page.wait_for_function(
                "document.getElementById('transcript').innerText.includes('got: yes')"
            )
            assert "→ yes (in the browser)" in page.inner_text("#transcript")
            # An approval: an AG-UI interrupt the page asks about and resumes.
            page.fill("#input", "delete notes.txt")
            page.click("#send")
            page.wait_for_function(
                "document.getElementById('transcript').innerText.includes('got: deleted notes.txt')"
            )
            assert questions[0] == "ok?" and questions[1].startswith("Allow delete?")
        finally:
            context.close()


def test_another_origin_is_not_allowed_by_cors(page_and_server: tuple[str, ServeProcess]) -> None:
    import httpx

    _, server = page_and_server
    preflight = httpx.options(
        server.url + "/agui",
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers
