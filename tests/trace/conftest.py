"""Fixtures for the trace tests: the demo recorded into a trace store, the page served by uvicorn
on 127.0.0.1, and Debian's Chromium driven by Playwright (no browser download: the system
binary, with the flags a closed network needs); and a turn with images, files and reasoning
(``trace_parts.record_parts``) recorded and served for the page's tests of parts; the pauses,
cache breaks and subagent runs of ``trace_scenes.record_scenes``, recorded and served."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from trace_page import CHROMIUM, CHROMIUM_ARGS, DEMO_PRICES, TOKEN, Browser, Served, serve
from trace_parts import record_parts, write_hostile
from trace_scenes import record_scenes

from plait.cli.demo import bundled_skills
from plait.cli.demo_script import run_demo
from plait.trace import SQLiteTraceStore, TraceRecorder, create_app


def record_demo(path: Path, workdir: Path) -> None:
    """Run ``plait demo``'s three turns with a recorder writing to ``path``."""
    store = SQLiteTraceStore(path)

    async def main() -> None:
        recorder = TraceRecorder(store, agent="demo")
        await run_demo(Console(file=io.StringIO()), bundled_skills(), workdir, recorder)
        await recorder.aclose()

    asyncio.run(main())


@pytest.fixture(scope="session")
def demo_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("demo")
    path = folder / "traces.sqlite3"
    record_demo(path, folder)
    return path


@pytest.fixture(scope="session")
def served(demo_traces: Path) -> Iterator[Served]:
    store = SQLiteTraceStore(demo_traces)
    with serve(create_app(store, token=TOKEN, prices=DEMO_PRICES), store) as served:
        yield served


@pytest.fixture(scope="module")
def browser(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        requests: list[str] = []
        context.on("request", lambda r: requests.append(r.url))
        page = context.new_page()
        page.set_default_timeout(15_000)
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        try:
            yield Browser(page, requests, console)
        finally:
            with contextlib.suppress(Exception):
                context.close()


@pytest.fixture(scope="session")
def parts_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite trace file holding ``record_parts``' turn and ``write_hostile``'s run."""
    path = tmp_path_factory.mktemp("parts") / "traces.sqlite3"

    async def main() -> None:
        recorder = await record_parts(SQLiteTraceStore(path))
        await write_hostile(recorder.store)
        await recorder.aclose()

    asyncio.run(main())
    return path


@pytest.fixture(scope="session")
def parts_served(parts_traces: Path) -> Iterator[Served]:
    store = SQLiteTraceStore(parts_traces)
    with serve(create_app(store, token=TOKEN), store) as served:
        yield served


@pytest.fixture(scope="session")
def scenes_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``record_scenes``' threads in a SQLite trace file, served."""
    path = tmp_path_factory.mktemp("scenes") / "traces.sqlite3"

    async def main() -> None:
        recorder = await record_scenes(SQLiteTraceStore(path))
        await recorder.aclose()

    asyncio.run(main())
    store = SQLiteTraceStore(path)
    with serve(create_app(store, token=TOKEN), store) as served:
        yield served
