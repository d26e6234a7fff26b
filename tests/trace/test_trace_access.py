"""Who may read the trace page (issue 29): the token ``plait ui`` prints, and the headers every
answer carries. Before, any user of the machine could read ``/api/runs`` on 127.0.0.1."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from trace_page import Browser

from plait.errors import ConfigurationError
from plait.trace import SQLiteTraceStore, create_app
from plait.trace.access import check_token, new_token
from plait.trace.server import free_port, page_html

TOKEN = new_token()
BASE = "http://127.0.0.1:7600"
PATHS = ["/", "/api/runs", "/api/prices", "/api/runs/nope", "/api/blobs/nope", "/elsewhere"]


@pytest.fixture
def client(demo_traces: Path) -> Iterator[TestClient]:
    app = create_app(SQLiteTraceStore(demo_traces), token=TOKEN)
    with TestClient(app, base_url=BASE) as client:
        yield client


def test_no_token_is_401_and_a_wrong_one_403_saying_where_the_token_is(
    client: TestClient,
) -> None:
    wrong = new_token()
    for path in PATHS:
        missing = client.get(path)
        assert missing.status_code == 401, path
        text = missing.json()["error"] if path.startswith("/api/") else missing.text
        assert "open the address plait ui printed" in text and "--no-token" in text
        for kind, request in {
            "query": {"params": {"token": wrong}},
            "header": {"headers": {"Authorization": f"Bearer {wrong}"}},
            "cookie": {"headers": {"Cookie": f"plait-ui-7600={wrong}"}},
            "prefix": {"params": {"token": TOKEN[:-1]}},
            "longer": {"params": {"token": TOKEN + "x"}},
        }.items():
            refused = client.get(path, **request)  # type: ignore[arg-type]
            assert refused.status_code == 403, (path, kind)
            assert "Wrong token" in refused.text and "'runs'" not in refused.text


def test_the_token_in_the_url_sets_a_strict_httponly_cookie_the_page_then_uses(
    client: TestClient,
) -> None:
    page = client.get("/", params={"token": TOKEN})
    assert page.status_code == 200 and "<title>plait traces</title>" in page.text
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"plait-ui-7600={TOKEN};")
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {p.strip() for p in cookie.split(";")}
    runs = client.get("/api/runs", headers={"Cookie": f"plait-ui-7600={TOKEN}"})
    assert runs.status_code == 200 and len(runs.json()) == 3
    bearer = client.get("/api/prices", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200 and "set-cookie" not in bearer.headers
    other_port = client.get("/api/runs", headers={"Cookie": f"plait-ui-7601={TOKEN}"})
    assert other_port.status_code == 401  # another plait ui's cookie is not this one's


def test_without_a_token_the_app_answers_anyone(demo_traces: Path) -> None:
    app = create_app(SQLiteTraceStore(demo_traces), token=None)
    with TestClient(app, base_url=BASE) as client:
        assert client.get("/api/runs").status_code == 200


def test_every_answer_carries_the_security_headers(client: TestClient) -> None:
    html = page_html()
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.DOTALL)
    styles = re.findall(r"<style>(.*?)</style>", html, flags=re.DOTALL)
    assert len(scripts) == len(styles) == 1 and " style=" not in html

    def digest(block: str) -> str:
        return base64.b64encode(hashlib.sha256(block.encode()).digest()).decode()

    answers = [  # refusals first: the client keeps the cookie the token's first answer sets
        client.get("/api/runs"),
        client.get("/", params={"token": "x" * 43}),
        client.get("/api/runs", headers={"Host": "evil.example"}),
        client.get("/", params={"token": TOKEN}),
        client.get("/api/runs", params={"token": TOKEN}),
        client.get("/api/runs/nope", params={"token": TOKEN}),
    ]
    assert [a.status_code for a in answers] == [401, 403, 400, 200, 200, 404]
    for answer in answers:
        policy = answer.headers["content-security-policy"]
        assert f"script-src 'sha256-{digest(scripts[0])}'" in policy
        assert f"style-src 'sha256-{digest(styles[0])}'" in policy
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe" not in policy
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert answer.headers["cache-control"] == "no-store"


def test_a_token_set_by_hand_must_be_long_and_url_safe(tmp_path: Path) -> None:
    assert check_token("a-fixed-token-of-24chars") == "a-fixed-token-of-24chars"
    for bad in ("short", "x" * 20 + " y", "x" * 20 + ";", "é" * 20):
        with pytest.raises(ConfigurationError, match="at least 16 characters"):
            check_token(bad)
    with pytest.raises(ConfigurationError, match="token must be"):
        create_app(SQLiteTraceStore(tmp_path / "t.sqlite3"), token="")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0  # not listening yet


def test_the_browser_opens_the_address_plait_ui_prints_and_nothing_else(
    browser: Browser, demo_traces: Path, tmp_path: Path
) -> None:
    port = free_port()
    command = ["ui", "--no-browser", "--traces", str(demo_traces), "--port", str(port)]
    server = subprocess.Popen(
        [sys.executable, "-c", "from plait.cli import main; main()", *command],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")},
            "PLAIT_HOME": str(tmp_path),
        },
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        found = re.search(rf"http://127\.0\.0\.1:{port}/\?token=([A-Za-z0-9_-]{{43}})", first)
        assert found is not None, first
        url, base = found.group(), f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 20
        while (status := _status(base)) != 401:  # uvicorn prints nothing when ready
            assert time.monotonic() < deadline, f"plait ui did not answer within 20 s ({status})"
            time.sleep(0.05)
        page = browser.page
        page.context.clear_cookies()
        refused = page.goto(base)
        assert refused is not None and refused.status == 401
        assert "open the address plait ui printed" in page.inner_text("body")
        wrong = page.goto(base + "?token=" + new_token())
        assert wrong is not None and wrong.status == 403
        browser.console.clear()
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']")
        assert page.url == base  # the page dropped the token from the address bar
        assert page.locator(".run-item").count() == 3
        item = page.locator(".run-item").last
        item.click()
        page.wait_for_selector(f"#waterfall[data-run-id='{item.get_attribute('data-run-id')}']")
        # the bars' positions are set through the CSSOM: the policy allows no style attribute
        widths = page.locator(".bar.run").evaluate("(el) => el.style.width")
        assert widths == "100%"
        page.reload()  # the cookie now stands for the token
        page.wait_for_selector("body[data-ready='1']")
        assert page.locator(".run-item").count() == 3
        assert [m for m in browser.console if "Content Security Policy" in m] == []
    finally:
        server.terminate()
        server.wait(timeout=20)
