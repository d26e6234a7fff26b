"""Threads and runs (the Agent Protocol shape) against a real ``plait serve`` process."""

from __future__ import annotations

import json

import httpx
from serve_process import ServeProcess


def api(server: ServeProcess) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=server.headers(), timeout=60)


def test_threads_are_created_listed_read_and_deleted(server: ServeProcess) -> None:
    with api(server) as c:
        made = c.post("/threads", json={"thread_id": "tr-1", "metadata": {"owner": "me"}})
        assert made.status_code == 201 and made.json()["metadata"] == {"owner": "me"}
        assert (
            c.post("/threads", json={"thread_id": "tr-1"}).json()["error"]["type"]
            == "thread_exists"
        )
        assert "tr-1" in [t["thread_id"] for t in c.get("/threads").json()["threads"]]
        got = c.get("/threads/tr-1").json()
        assert got["messages"] == [] and got["metadata"] == {"owner": "me"}
        assert c.delete("/threads/tr-1").status_code == 204
        assert c.get("/threads/tr-1").status_code == 404
        assert c.delete("/threads/tr-1").json()["error"]["type"] == "not_found"


def test_a_run_is_started_waited_for_and_read(server: ServeProcess) -> None:
    with api(server) as c:
        started = c.post("/threads/tr-2/runs", json={"input": "add 1 2"})
        assert started.status_code == 202
        run_id = started.json()["run_id"]
        done = c.get(f"/threads/tr-2/runs/{run_id}/wait").json()
        assert done["status"] == "success" and done["output"] == "sum: 3"
        assert c.get(f"/threads/tr-2/runs/{run_id}").json() == done
        roles = [m["role"] for m in c.get("/threads/tr-2").json()["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"]


def test_a_run_streams_its_events_replayed_from_the_start(server: ServeProcess) -> None:
    with api(server) as c:
        run_id = c.post("/threads/tr-3/runs", json={"input": "hello"}).json()["run_id"]
        kinds: list[str] = []
        last: dict[str, object] = {}
        with c.stream("GET", f"/threads/tr-3/runs/{run_id}/stream") as response:
            for line in response.iter_lines():
                if line.startswith("event: "):
                    kinds.append(line[7:])
                elif line.startswith("data: "):
                    last = json.loads(line[6:])
        assert kinds[0] == "turn_started" and "turn_finished" in kinds and kinds[-1] == "run"
        assert last["status"] == "success" and last["output"] == "echo: hello"


def test_a_run_is_cancelled_and_its_thread_stays_usable(server: ServeProcess) -> None:
    with api(server) as c:
        run_id = c.post("/threads/tr-4/runs", json={"input": "slow a b c d e f g h"}).json()[
            "run_id"
        ]
        cancelled = c.post(f"/threads/tr-4/runs/{run_id}/cancel").json()
        assert cancelled["status"] == "cancelled"
        again = c.post("/threads/tr-4/runs", json={"input": "next"}).json()["run_id"]
        assert c.get(f"/threads/tr-4/runs/{again}/wait").json()["output"] == "echo: next"
        messages = c.get("/threads/tr-4").json()["messages"]
        assert [m["content"] for m in messages][-2:] == ["next", "echo: next"]


def test_an_unknown_run_is_404(server: ServeProcess) -> None:
    with api(server) as c:
        answer = c.get("/threads/tr-5/runs/run_nope")
        assert answer.status_code == 404 and answer.json()["error"]["type"] == "not_found"
