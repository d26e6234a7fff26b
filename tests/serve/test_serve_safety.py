"""Safe by default: auth, body limits, JSON errors, access logs, disconnects, one thread shared
by two clients at once; all against a real ``plait serve`` process."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_inprocess import run_plait
from serve_process import ServeProcess

CHAT = "/v1/chat/completions"


def chat(text: str, stream: bool = False) -> dict[str, object]:
    return {"model": "plait", "messages": [{"role": "user", "content": text}], "stream": stream}


def test_no_token_is_refused_with_401(server: ServeProcess) -> None:
    answer = httpx.post(server.url + CHAT, json=chat("hi"))
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "unauthorized"
    assert answer.headers["www-authenticate"].startswith("Bearer")


def test_a_wrong_token_is_refused_with_403(server: ServeProcess) -> None:
    answer = httpx.get(server.url + "/v1/models", headers={"Authorization": "Bearer " + "x" * 43})
    assert answer.status_code == 403
    assert answer.json()["error"]["type"] == "forbidden"


def test_the_right_token_is_accepted_and_healthz_is_open(server: ServeProcess) -> None:
    assert httpx.get(server.url + "/v1/models", headers=server.headers()).status_code == 200
    assert httpx.get(server.url + "/healthz").json() == {"ok": True}


def test_the_auth_scheme_is_case_insensitive_as_http_says(server: ServeProcess) -> None:
    token = server.headers()["Authorization"].split(" ", 1)[1]
    for scheme in ("bearer", "BEARER"):
        answer = httpx.get(
            server.url + "/v1/models", headers={"Authorization": f"{scheme} {token}"}
        )
        assert answer.status_code == 200, scheme


def test_an_oversize_body_is_refused_before_it_is_read(server: ServeProcess) -> None:
    big = chat("x" * (2 << 20))
    answer = httpx.post(server.url + CHAT, json=big, headers=server.headers())
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "body_too_large"


def test_an_oversize_chunked_body_is_refused_while_read(server: ServeProcess) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b"x" * 65536

    answer = httpx.post(server.url + CHAT, content=chunks(), headers=server.headers())
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "body_too_large"


@pytest.mark.parametrize(
    ("path", "body", "status", "kind"),
    [
        (CHAT, b"{not json", 400, "invalid_request"),
        (CHAT, b"[1, 2]", 400, "invalid_request"),
        (CHAT, b'{"model": "plait", "messages": []}', 400, "invalid_request"),
        ("/nowhere", b"{}", 404, "not_found"),
        ("/agui", b'{"threadId": 3}', 400, "invalid_request"),
    ],
)
def test_errors_are_json_with_a_type_and_a_message(
    server: ServeProcess, path: str, body: bytes, status: int, kind: str
) -> None:
    answer = httpx.post(server.url + path, content=body, headers=server.headers())
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["type"] == kind
    assert error["message"] and "Traceback" not in answer.text


def test_every_request_is_one_json_access_log_line(server: ServeProcess) -> None:
    httpx.get(server.url + "/v1/models", headers={**server.headers(), "X-Request-Id": "probe-1"})
    deadline = time.monotonic() + 10
    lines: list[dict[str, object]] = []
    while time.monotonic() < deadline and not lines:
        logged = [json.loads(x) for x in server.log_text().splitlines() if x.startswith("{")]
        lines = [x for x in logged if x.get("request_id") == "probe-1"]
    assert lines and lines[0]["path"] == "/v1/models" and lines[0]["status"] == 200


def stored(server: ServeProcess, thread: str) -> list[tuple[str, str]]:
    answer = httpx.get(server.url + f"/threads/{thread}", headers=server.headers()).json()
    return [(m["role"], m["content"]) for m in answer["messages"]]


def test_a_disconnect_mid_stream_cancels_the_turn_and_keeps_the_thread(
    server: ServeProcess,
) -> None:
    headers = {**server.headers(), "X-Plait-Thread": "dc-1"}
    with httpx.stream(
        "POST", server.url + CHAT, json=chat("slow a b c d e f g h i j", True), headers=headers
    ) as response:
        for line in response.iter_lines():
            if '"content": "echo' in line or '"content":"echo' in line:
                break  # the answer has started streaming: leave mid-stream
    after = httpx.post(server.url + CHAT, json=chat("after"), headers=headers, timeout=60)
    assert after.status_code == 200, after.text
    assert after.json()["choices"][0]["message"]["content"] == "echo: after"
    messages = stored(server, "dc-1")
    assert messages[0] == ("user", "slow a b c d e f g h i j")
    assert messages[-2:] == [("user", "after"), ("assistant", "echo: after")]
    assert ("assistant", "echo: slow a b c d e f g h i j") not in messages  # cut, not finished


def test_two_clients_on_one_thread_take_turns(server: ServeProcess) -> None:
    headers = {**server.headers(), "X-Plait-Thread": "shared-1"}
    answers: dict[str, str] = {}

    def send(text: str) -> None:
        answer = httpx.post(server.url + CHAT, json=chat(text), headers=headers, timeout=60)
        answers[text] = answer.json()["choices"][0]["message"]["content"]

    clients = [threading.Thread(target=send, args=(t,)) for t in ("slow one two", "quick")]
    for c in clients:
        c.start()
    for c in clients:
        c.join(timeout=60)
    assert answers == {"slow one two": "echo: slow one two", "quick": "echo: quick"}
    messages = stored(server, "shared-1")
    assert len(messages) == 4
    for user, assistant in zip(messages[::2], messages[1::2], strict=True):
        assert user[0] == "user" and assistant == ("assistant", f"echo: {user[1]}")


def test_serve_refuses_a_public_bind_without_a_token(tmp_path: Path) -> None:
    result = run_plait(
        "serve", "myapp:agent", "--host", "0.0.0.0", home=tmp_path, env={"PLAIT_SERVE_TOKEN": ""}
    )
    assert result.returncode == 2
    assert "without a token" in result.stderr + result.stdout


def test_serve_refuses_a_short_token(tmp_path: Path) -> None:
    result = run_plait("serve", "--token", "short", home=tmp_path)
    assert result.returncode == 2
    assert "at least 16" in result.stderr + result.stdout
