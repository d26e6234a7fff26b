"""The worker app ``plait serve`` runs (``plait.cli.serve_worker``), driven through its ASGI
lifespan in this process: it builds the agents from the environment, then leaves what startup
made out of later garbage collections (``gc.freeze()``), so full collections stay short."""

from __future__ import annotations

import gc
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.cli.serve_worker import _WorkerApp

MYAPP = Path(__file__).parent / "myapp.py"


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as usual


async def lifespan(app: _WorkerApp) -> list[dict[str, Any]]:
    """Start the app's lifespan and shut it down; the messages it sent."""
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []
    frozen: list[int] = []

    async def receive() -> dict[str, Any]:
        if len(incoming) == 1:  # startup is done: what it froze, before shutdown
            frozen.append(gc.get_freeze_count())
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "lifespan"}, receive, send)
    # after startup (before shutdown); a failed startup ends the lifespan there
    sent.append({"type": "frozen", "count": frozen[0] if frozen else gc.get_freeze_count()})
    return sent


async def test_startup_builds_the_agents_then_freezes_what_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    shutil.copy(MYAPP, tmp_path / "serve_worker_app.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PLAIT_TEST_SERVE_STORE", str(tmp_path / "t.sqlite3"))
    monkeypatch.setenv("PLAIT_SERVE_TARGET", "serve_worker_app:agent")
    monkeypatch.setenv("PLAIT_SERVE_LIMITS", '{"max_concurrent_runs": 7}')
    assert gc.get_freeze_count() == 0
    app = _WorkerApp()
    try:
        sent = await lifespan(app)
    finally:
        sys.modules.pop("serve_worker_app", None)
    assert [m["type"] for m in sent[:2]] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert sent[2]["count"] > 1000  # the modules and the agent, at least
    assert app.inner.state.plait.limits.max_concurrent_runs == 7  # the flags' limits arrived


async def test_a_failed_startup_freezes_nothing(
    monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    monkeypatch.setenv("PLAIT_SERVE_TARGET", "no_such_module_here:agent")
    sent = await lifespan(_WorkerApp())
    assert sent[0]["type"] == "lifespan.startup.failed"
    assert "no_such_module_here" in sent[0]["message"]
    assert sent[1]["count"] == 0
