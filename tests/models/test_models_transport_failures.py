"""Provider transport failures are typed and every wait ends: a connection dropped mid-stream is a
``ProviderError`` for both SDKs; a ``Retry-After`` that is not finite falls back to the bounded
backoff, and an HTTP date without a zone is read as GMT whatever the local zone.

The official SDKs talk to :class:`WireServer`; one server here declares a longer body than it
sends and closes the connection, as a proxy or a dropped link does mid-stream.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from wire_server import WireServer

from plait.errors import ProviderError
from plait.messages import UserMessage
from plait.models.anthropic import AnthropicModel
from plait.models.base import ModelRequest, StreamEvent, TextDelta
from plait.models.openai import OpenAIChatModel
from plait.models.retrying import Backoff, retry_after_seconds

FIXTURES = Path(__file__).parent / "fixtures"
HELLO = ModelRequest(messages=[UserMessage("What is the weather in Paris?")])


def cut_off_after(server: WireServer, body: bytes) -> None:
    """Make ``server`` answer every request with ``body`` as an event stream that announces
    500 more bytes than it sends, then closes the connection."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body) + 500))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server._httpd.RequestHandlerClass = Handler


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as wire:
        yield wire


async def test_anthropic_connection_dropped_mid_stream_is_a_typed_provider_error(
    server: WireServer,
) -> None:
    sse = (FIXTURES / "anthropic" / "stream_tool_use.sse").read_bytes()
    cut_off_after(server, sse[: len(sse) // 2])
    model = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url)
    seen: list[StreamEvent] = []
    try:
        with pytest.raises(ProviderError, match="connection failed mid-response") as caught:
            async for event in model.stream(HELLO):
                seen.append(event)
    finally:
        await model.aclose()
    assert caught.value.provider == "anthropic"
    assert any(isinstance(e, TextDelta) for e in seen)  # it did break mid-way


async def test_openai_connection_dropped_mid_stream_is_a_typed_provider_error(
    server: WireServer,
) -> None:
    sse = (FIXTURES / "openai" / "stream_tool_calls.sse").read_bytes()
    cut_off_after(server, sse[: len(sse) // 2])
    model = OpenAIChatModel("gpt-4.1-mini", api_key="sk-test", base_url=server.url + "/v1")
    try:
        with pytest.raises(ProviderError, match="connection failed mid-response") as caught:
            async for _ in model.stream(HELLO):
                pass
    finally:
        await model.aclose()
    assert caught.value.provider == "openai"


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf"])
async def test_a_non_finite_retry_after_falls_back_to_backoff(
    server: WireServer, header: str, value: str
) -> None:
    # asyncio.sleep(nan) never returns: the agent would hang on one bad header.
    sleeps: list[float] = []

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    model = OpenAIChatModel(
        "gpt-4.1-mini",
        api_key="sk-test",
        base_url=server.url + "/v1",
        backoff=Backoff(base_delay=0.5, jitter=0.0, sleep=record_sleep),
    )
    server.reply("openai/rate_limit.json", status=429, headers={header: value})
    server.reply("openai/text.json")
    try:
        response = await model.generate(HELLO)
    finally:
        await model.aclose()
    assert response.content
    assert sleeps == [0.5]
    assert retry_after_seconds({header: value}) is None


def test_backoff_ignores_a_nan_retry_after() -> None:
    assert Backoff(base_delay=0.5, jitter=0.0).delay(1, float("nan")) == 1.0


def test_an_http_date_without_a_zone_is_gmt_whatever_the_local_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tzset = getattr(time, "tzset", None)
    if tzset is None:
        pytest.skip("time.tzset is not available on this platform")
    # The asctime form of an HTTP date ("Sun Nov  6 08:49:37 1994") has no zone; it is GMT.
    when = time.asctime(time.gmtime(time.time() + 20))
    assert email.utils.parsedate_to_datetime(when).tzinfo is None
    try:
        for zone in ("America/Los_Angeles", "Asia/Tokyo", "UTC"):
            monkeypatch.setenv("TZ", zone)
            tzset()
            waited = retry_after_seconds({"retry-after": when})
            assert waited is not None and 15 <= waited <= 20, (zone, waited)
    finally:
        monkeypatch.undo()
        tzset()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("status", "body", "content_type"),
    [
        (502, b"<html>" + b"x" * 50_000 + b"</html>", "text/html"),
        (
            400,
            b'{"type": "error", "error": {"message": "' + b"y" * 50_000 + b'"}}',
            "application/json",
        ),
    ],
    ids=["html-page", "json-message"],
)
async def test_an_error_body_of_any_size_gives_a_bounded_message(
    server: WireServer, provider: str, status: int, body: bytes, content_type: str
) -> None:
    # A proxy's error page or a server's own message can be megabytes; the error (printed by
    # the CLI, stored in events and traces) repeats a bounded part of it.
    model: OpenAIChatModel | AnthropicModel
    if provider == "openai":
        model = OpenAIChatModel("m", api_key="k", base_url=server.url + "/v1", max_retries=0)
    else:
        model = AnthropicModel("m", api_key="k", base_url=server.url, max_retries=0)
    server.reply_raw(body, status=status, content_type=content_type)

    with pytest.raises(ProviderError) as caught:
        await model.generate(HELLO)
    await model.aclose()

    assert caught.value.status == status
    assert len(str(caught.value)) < 2_000
