"""``plait serve``'s bound flags (``--max-body-bytes``, ``--max-concurrent-runs``,
``--queue-timeout``, ``--run-timeout``, ...) reach every worker's ``ServeLimits``; a bad value
stops it before it starts, naming the flag. Against a real ``plait serve`` process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_inprocess import run_plait
from serve_process import ServeProcess, serve_process

from plait.serve.limits import ServeLimits
from plait.trace.access import new_token

CHAT = "/v1/chat/completions"
SLOW = "slow " + "word " * 30  # streamed a word every 0.2 s: about 6 s


def chat(text: str, thread: str) -> tuple[dict[str, object], dict[str, str]]:
    body: dict[str, object] = {"model": "plait", "messages": [{"role": "user", "content": text}]}
    return body, {"x-plait-thread": thread}


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    flags: tuple[str, ...] = ("--max-body-bytes", "2000", "--max-concurrent-runs", "1")
    flags += ("--queue-timeout", "0.5", "--run-timeout", "1")
    with serve_process(tmp_path_factory.mktemp("bounded"), token=new_token(), args=flags) as s:
        yield s


def post(server: ServeProcess, text: str, thread: str) -> httpx.Response:
    body, headers = chat(text, thread)
    return httpx.post(server.url + CHAT, json=body, headers={**server.headers(), **headers})


def test_the_default_bound_on_running_turns_is_1000() -> None:
    assert ServeLimits().max_concurrent_runs == 1000


def test_max_body_bytes_bounds_the_body(bounded: ServeProcess) -> None:
    assert post(bounded, "hi", "small").status_code == 200
    answer = post(bounded, "x" * 3000, "big")
    assert answer.status_code == 413
    assert "2000 bytes" in answer.json()["error"]["message"]


def test_run_timeout_cancels_a_long_turn(bounded: ServeProcess) -> None:
    answer = post(bounded, SLOW, "long")
    assert answer.status_code == 504
    error = answer.json()["error"]
    assert error["type"] == "deadline_exceeded" and "run_timeout (1 s)" in error["message"]


def test_max_concurrent_runs_and_queue_timeout_answer_503(bounded: ServeProcess) -> None:
    first: list[httpx.Response] = []
    running = threading.Thread(target=lambda: first.append(post(bounded, SLOW, "busy-1")))
    running.start()
    try:
        # The slot is taken once the first turn streams; poll its thread until it has begun.
        with httpx.Client(base_url=bounded.url, headers=bounded.headers()) as client:
            for _ in range(100):
                if client.get("/threads/busy-1").status_code == 200:
                    break
                threading.Event().wait(0.02)  # a poll, bounded to 2 s
        second = post(bounded, "hi", "busy-2")
        assert second.status_code == 503
        assert second.json()["error"]["type"] == "server_busy"
        assert "1 turns are running" in second.json()["error"]["message"]
    finally:
        running.join(timeout=30)
    assert first and first[0].status_code == 504  # the first ran on, into its run_timeout


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--max-concurrent-runs", "0", "at least 1"),
        ("--max-body-bytes", "0", "at least 1"),
        ("--max-waiting-per-thread", "0", "at least 1"),
        ("--run-timeout", "0", "positive number of seconds"),
        ("--idle-timeout", "-1", "positive number of seconds"),
        ("--queue-timeout", "0", "positive number of seconds"),
    ],
)
def test_a_bad_bound_stops_serve_naming_its_flag(
    tmp_path: Path, flag: str, value: str, said: str
) -> None:
    result = run_plait("serve", "myapp:agent", flag, value, home=tmp_path)
    assert result.returncode == 2
    said_all = result.stderr + result.stdout
    assert f"{flag} {float(value):g}" in said_all and said in said_all
