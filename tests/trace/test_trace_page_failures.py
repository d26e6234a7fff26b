"""The trace page in a real headless Chromium over runs that went wrong: a model call with
provider retries (the official ``openai`` SDK against a local wire server answering 500 and 429
first: waterfall badge, model-call panel), a run that failed outside any model call (a limit)
and a cancelled run, each shown with its error."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from trace_page import TOKEN, Browser, Served, serve
from wire_server import WireServer

from plait import Agent, Limits, ScriptedModel, ToolCall
from plait.errors import LimitExceeded
from plait.models.openai import OpenAIChatModel
from plait.models.retrying import Backoff
from plait.tools import tool
from plait.trace import SQLiteTraceStore, TraceRecorder, create_app

DOCS = Path(__file__).parents[2] / "docs"


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


async def _no_wait(seconds: float) -> None:
    return None


def _record(path: Path) -> None:
    async def main() -> None:
        recorder = TraceRecorder(SQLiteTraceStore(path), agent="failures")
        with WireServer(FIXTURES) as server:
            server.reply("server_error.json", status=500)
            server.reply("rate_limit.json", status=429, headers={"retry-after": "0"})
            server.reply("text.json")
            model = OpenAIChatModel(
                "gpt-4.1-mini",
                api_key="sk-test",
                base_url=server.url + "/v1",
                backoff=Backoff(base_delay=0.25, jitter=0.0, sleep=_no_wait),
                max_retries=3,
            )
            await Agent(model, middleware=[recorder]).run("flaky provider", thread_id="retries")
            await model.aclose()
        limited = Agent(
            ScriptedModel([ToolCall("c1", "echo", {"text": "a"})]),
            tools=[echo],
            middleware=[recorder],
            limits=Limits(model_calls_per_turn=1),
        )
        with pytest.raises(LimitExceeded):
            await limited.run("hit the limit", thread_id="limits")
        started = asyncio.Event()

        @tool
        async def hang() -> str:
            """Wait forever."""
            started.set()
            await asyncio.Event().wait()
            return "never"

        hung = Agent(
            ScriptedModel([ToolCall("c2", "hang", {})]), tools=[hang], middleware=[recorder]
        )
        task = asyncio.create_task(hung.run("cancel me", thread_id="cancels"))
        await asyncio.wait_for(started.wait(), timeout=10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await recorder.aclose()

    asyncio.run(main())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Overrides the demo's server (conftest) for this module: these runs instead."""
    path = tmp_path_factory.mktemp("failures") / "traces.sqlite3"
    _record(path)
    store = SQLiteTraceStore(path)
    with serve(create_app(store, token=TOKEN), store) as served:
        yield served


@pytest.fixture(scope="module")
def page(browser: Browser, served: Served) -> Browser:
    browser.page.goto(served.page_url)
    browser.page.wait_for_selector("body[data-ready='1']")
    return browser


def _open(page: Browser, text: str) -> None:
    item = page.page.locator(".run-item", has_text=text)
    item.click()
    run_id = item.get_attribute("data-run-id")
    page.page.wait_for_selector(f"#waterfall[data-run-id='{run_id}']")


def _shot(page: Browser, selector: str, name: str, tmp_path: Path) -> None:
    target = DOCS if os.environ.get("PLAIT_UPDATE_SCREENSHOTS") else tmp_path
    path = target / f"trace-{name}.png"
    page.page.locator(selector).screenshot(path=str(path))
    assert path.stat().st_size > 1_000


def test_provider_retries_show_on_the_waterfall_and_the_model_call(
    page: Browser, tmp_path: Path
) -> None:
    _open(page, "flaky provider")
    assert page.page.locator("#run-error").count() == 0
    model_row = page.page.locator(".span-row[data-kind='model']")
    assert model_row.locator(".badge.retry").inner_text() == "2 retries"
    actions = page.page.locator(".span-row[data-kind='action'] .wf-name").all_inner_texts()
    assert actions == ["model call retried", "model call retried"]
    model_row.click()
    page.page.wait_for_selector("#call-retries")
    rows = page.page.locator("#call-retries .retry-row").all()
    cells = [r.locator("td").all_inner_texts() for r in rows]
    assert [c[0] for c in cells] == ["1 of 3", "2 of 3"]
    assert [c[1] for c in cells] == ["250.0 ms", "0.0 ms"]  # the 429 said retry-after: 0
    assert cells[0][2].startswith("ProviderError") and "500" in cells[0][2]
    assert cells[1][2].startswith("ProviderError") and "429" in cells[1][2]
    _shot(page, "main", "9-retries", tmp_path)


def test_a_run_that_failed_outside_a_model_call_shows_its_error(
    page: Browser, tmp_path: Path
) -> None:
    item = page.page.locator(".run-item", has_text="hit the limit")
    assert item.locator(".status-error").inner_text() == "error"
    assert item.locator(".run-error").inner_text().startswith("LimitExceeded:")
    _open(page, "hit the limit")
    banner = page.page.locator("#run-error")
    assert banner.get_attribute("data-status") == "error"
    assert banner.inner_text().startswith("run error: LimitExceeded:")
    assert page.page.locator(".run-row .bar.error").count() == 1
    _shot(page, "#waterfall", "10-failed-run", tmp_path)


def test_a_cancelled_run_is_shown_as_cancelled(page: Browser) -> None:
    item = page.page.locator(".run-item", has_text="cancel me")
    assert item.locator(".status-cancelled").inner_text() == "cancelled"
    _open(page, "cancel me")
    banner = page.page.locator("#run-error")
    assert banner.get_attribute("data-status") == "cancelled"
    assert banner.inner_text().startswith("run cancelled: CancelledError")


def test_no_request_left_127_0_0_1(page: Browser) -> None:
    assert page.requests
    assert all(url.startswith("http://127.0.0.1:") for url in page.requests), page.requests
