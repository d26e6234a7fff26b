"""Who may call the server, and one JSON line per request.

:class:`BearerGate` lets through a request whose ``Authorization: Bearer TOKEN`` matches the
server's token, compared with :func:`hmac.compare_digest`; without it the answer is 401, with a
wrong one 403, both ``{"error": {"type": "unauthorized" | "forbidden", "message"}}``.
``GET /healthz`` is open (a load balancer's probe), and so is a CORS preflight (``OPTIONS``).
The principal a request acts for (what scopes derived thread ids,
:mod:`plait.serve.openai_compat`) is a short hash of the token it carried, kept in
``scope["state"]["principal"]``.

:class:`AccessLog` writes, for each HTTP request, one JSON object on one line to the
``plait.serve.access`` logger: ``method``, ``path``, ``status``, ``ms`` (to the last byte
sent), ``bytes``, ``client``, ``request_id`` (also sent back as ``X-Request-Id``) and
``worker`` (the worker process id, also sent back as ``X-Plait-Worker``: which of
``--workers N`` answered).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from plait.messages import new_id

__all__ = ["TOKEN_ENV", "AccessLog", "BearerGate", "principal_of"]

TOKEN_ENV = "PLAIT_SERVE_TOKEN"
"""Environment variable: the bearer token ``plait serve`` requires."""

OPEN_PATHS = frozenset({"/healthz"})

Scope = MutableMapping[str, Any]
ASGIMessage = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[ASGIMessage]]
Send = Callable[[ASGIMessage], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

access_logger = logging.getLogger("plait.serve.access")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if bytes(key).lower() == name:
            return bytes(value).decode("latin-1")
    return None


def principal_of(token: str | None) -> str:
    """The principal for ``token``: a 16-hex-digit hash, ``"anonymous"`` without one."""
    if not token:
        return "anonymous"
    return hashlib.sha256(token.encode()).hexdigest()[:16]


async def send_json(
    send: Send, status: int, body: object, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class BearerGate:
    """ASGI middleware: only requests with the bearer ``token`` reach ``app`` (``None``: all,
    as principal ``anonymous``)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self._token = token.encode() if token else None
        self._principal = principal_of(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = self._principal
        if (
            self._token is None
            or scope.get("path") in OPEN_PATHS
            or scope.get("method") == "OPTIONS"
        ):
            await self.app(scope, receive, send)
            return
        authorization = _header(scope, b"authorization") or ""
        given = authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""
        if given and hmac.compare_digest(given.encode(), self._token):
            await self.app(scope, receive, send)
            return
        if given:
            kind, status, message = "forbidden", 403, "Wrong bearer token for this server."
        else:
            kind, status = "unauthorized", 401
            message = (
                "This server needs 'Authorization: Bearer TOKEN' (the token it was started "
                "with, $PLAIT_SERVE_TOKEN)."
            )
        await send_json(
            send,
            status,
            {"error": {"type": kind, "message": message}},
            ((b"www-authenticate", b'Bearer realm="plait serve"'),),
        )


class AccessLog:
    """ASGI middleware: one JSON line per request on the ``plait.serve.access`` logger."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = _header(scope, b"x-request-id") or new_id()[:16]
        scope.setdefault("state", {})["request_id"] = request_id
        seen: dict[str, int] = {"status": 0, "bytes": 0}

        async def logged(message: ASGIMessage) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = int(message["status"])
                message["headers"] = [
                    *message.get("headers", ()),
                    (b"x-request-id", request_id.encode()),
                    (b"x-plait-worker", str(os.getpid()).encode()),
                ]
            elif message["type"] == "http.response.body":
                seen["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, logged)
        finally:
            if access_logger.isEnabledFor(logging.INFO):
                self._log(scope, seen, started, request_id)

    @staticmethod
    def _log(scope: Scope, seen: dict[str, int], started: float, request_id: str) -> None:
        client = scope.get("client")
        access_logger.info(
            json.dumps(
                {
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "status": seen["status"] or 499,
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                    "bytes": seen["bytes"],
                    "client": f"{client[0]}:{client[1]}" if client else None,
                    "request_id": request_id,
                    "worker": os.getpid(),
                }
            )
        )
