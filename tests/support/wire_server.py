"""A local HTTP server on 127.0.0.1 that answers provider SDKs from fixture files.

Tests queue replies (a fixture file's body, a status, headers); each request takes the next one
and is recorded, so a test can assert on the exact JSON the SDK sent. ``.sse`` fixtures are
served as ``text/event-stream``, written event by event. No SDK is patched; nothing leaves the
machine.

A Chat Completions body with a ``response_format`` of type ``json_schema`` and ``strict: true``
is held to OpenAI's strict-schema rules (:mod:`strict_schema`) and refused with the API's 400
before any queued reply is taken.

``serve_models(ids)`` makes ``GET …/models`` (the OpenAI models list) answer those ids without a
queued reply.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from strict_schema import openai_schema_problem


@dataclass
class Reply:
    status: int
    chunks: list[bytes]
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)
    stall_after: int | None = None
    """Stall (hold the connection open, send nothing more) after this many chunks; ``0`` stalls
    before the status line. Stalls end when the server stops."""


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class WireServer:
    """Serve queued replies to whatever connects; use as a context manager."""

    def __init__(self, fixtures: Path) -> None:
        self.fixtures = fixtures
        self.received: list[Received] = []
        self._replies: deque[Reply] = deque()
        self.models: list[str] | None = None
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> WireServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def reply(
        self, fixture: str, *, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        """Queue the body of ``fixtures/<fixture>`` as the next reply."""
        path = self.fixtures / fixture
        data = path.read_bytes()
        if path.suffix == ".sse":
            events = [e.strip(b"\n") + b"\n\n" for e in data.split(b"\n\n") if e.strip()]
            reply = Reply(status, events, "text/event-stream", dict(headers or {}))
        else:
            reply = Reply(status, [data], "application/json", dict(headers or {}))
        self._replies.append(reply)

    def reply_json(
        self, body: Any, *, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        self._replies.append(
            Reply(status, [json.dumps(body).encode()], "application/json", dict(headers or {}))
        )

    def reply_raw(
        self, body: bytes, *, status: int = 200, content_type: str = "application/json"
    ) -> None:
        """Queue ``body`` as it is, whatever it holds (a malformed reply)."""
        self._replies.append(Reply(status, [body], content_type))

    def stall(self, fixture: str | None = None, *, after: int = 0) -> None:
        """Queue a reply that accepts the request and then never answers: with no ``fixture``,
        not even a status line; with one, its first ``after`` chunks (SSE events), then
        nothing, the connection held open."""
        if fixture is None:
            self._replies.append(Reply(200, [], "application/json", stall_after=0))
            return
        self.reply(fixture)
        self._replies[-1].stall_after = after

    def serve_models(self, ids: list[str]) -> None:
        """Answer ``GET …/models`` with these model ids (as OpenAI's ``/v1/models`` does)."""
        self.models = list(ids)

    def _models_reply(self) -> Reply:
        data = [
            {"id": i, "object": "model", "created": 1750000000, "owned_by": "wire-server"}
            for i in self.models or []
        ]
        body = json.dumps({"object": "list", "data": data}).encode()
        return Reply(200, [body], "application/json")

    def bodies(self) -> list[Any]:
        return [r.body for r in self.received]

    def _next(self, received: Received) -> Reply:
        with self._lock:
            self.received.append(received)
            path = received.path.split("?", 1)[0]
            if received.method == "GET" and self.models is not None and path.endswith("/models"):
                return self._models_reply()
            refused = _refused_response_format(received.body)
            if refused is not None:
                return refused
            if self._replies:
                return self._replies.popleft()
        # 418: a status no adapter retries, so a missing reply fails the test at once.
        message = f"wire server: no reply queued for {received.method} {received.path}"
        error = {"type": "error", "error": {"type": "test_error", "message": message}}
        return Reply(418, [json.dumps(error).encode()], "application/json")


def _refused_response_format(body: Any) -> Reply | None:
    """OpenAI's 400 for a strict ``response_format`` whose schema breaks the strict rules."""
    fmt = body.get("response_format") if isinstance(body, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema") or {}
    if not spec.get("strict"):
        return None
    problem = openai_schema_problem(str(spec.get("name")), spec.get("schema"))
    if problem is None:
        return None
    error = {
        "message": problem,
        "type": "invalid_request_error",
        "param": "response_format",
        "code": None,
    }
    return Reply(400, [json.dumps({"error": error}).encode()], "application/json")


def _handler_for(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = server._next(Received(self.command, self.path, headers, body))
            if reply.stall_after == 0:
                server._release.wait()
                return
            self.send_response(reply.status)
            self.send_header("content-type", reply.content_type)
            self.send_header("content-length", str(sum(len(c) for c in reply.chunks)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            for index, chunk in enumerate(reply.chunks):
                if index == reply.stall_after:
                    server._release.wait()
                    return
                self.wfile.write(chunk)
                self.wfile.flush()

        do_GET = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
