"""Who may read the trace page: a token per ``plait ui`` start, and the headers every answer
carries.

The traces hold every input and tool output, and a port on 127.0.0.1 is open to every user of
the machine, so the page asks for a token, as Jupyter does. ``plait ui`` makes one per start
(:func:`new_token`, or ``$PLAIT_UI_TOKEN``) and prints the page's address with it
(``http://127.0.0.1:7600/?token=...``). :class:`TokenGate` accepts a request that carries it:

=============================  ==============================================================
where                          how
=============================  ==============================================================
``?token=`` in the URL         the address printed; the answer also sets the cookie below,
                               and the page then drops the token from the address bar
cookie ``plait-ui-<port>``     set by the server on the first visit with the token: HttpOnly,
                               ``SameSite=Strict``, the session only; one name per port, so two
                               ``plait ui`` on one machine keep their own
``Authorization: Bearer ...``  for scripts (``curl -H``)
=============================  ==============================================================

Each candidate is compared in constant time (:func:`hmac.compare_digest`). Without one the
answer is 401, with a wrong one 403; both say where the token is (JSON ``{"error": ...}`` under
``/api/``, plain text elsewhere). ``plait ui --no-token`` turns the gate off.

:class:`SecurityHeaders` adds, to every answer (refusals included): a Content-Security-Policy
that allows the page's own inline script and style by their SHA-256 hashes
(:func:`page_policy`) and nothing from elsewhere, ``X-Frame-Options: DENY``,
``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
``Cache-Control: no-store`` (traces are not left in the browser's disk cache).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from plait.errors import ConfigurationError

__all__ = [
    "MIN_TOKEN_CHARS",
    "TOKEN_ENV",
    "SecurityHeaders",
    "TokenGate",
    "check_token",
    "new_token",
    "page_policy",
]

TOKEN_ENV = "PLAIT_UI_TOKEN"
"""Environment variable: a fixed token for ``plait ui`` instead of a new one per start."""

MIN_TOKEN_CHARS = 16
"""A token set by hand must be at least this long (a new one is 43 characters)."""

_TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~-]+")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    """A fresh random token (:func:`secrets.token_urlsafe`, 32 bytes)."""
    return secrets.token_urlsafe(32)


def check_token(token: str, origin: str = f"${TOKEN_ENV}") -> str:
    """``token`` if it can be used (URL- and cookie-safe characters, at least
    :data:`MIN_TOKEN_CHARS`); a :class:`~plait.errors.ConfigurationError` naming ``origin``
    otherwise."""
    if len(token) < MIN_TOKEN_CHARS or not _TOKEN_CHARS.fullmatch(token):
        raise ConfigurationError(
            f"{origin} must be at least {MIN_TOKEN_CHARS} characters of A-Z, a-z, 0-9 and . _ ~ "
            f"- (it goes in a URL and a cookie); unset it for a new token per start, e.g. "
            f"{new_token()}."
        )
    return token


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _cookie_name(scope: Scope) -> str:
    server = scope.get("server")
    port = server[1] if server and len(server) > 1 and server[1] else 80
    return f"plait-ui-{port}"


def _cookies(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in (_header(scope, b"cookie") or "").split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            found.setdefault(name, value)
    return found


def _query_tokens(scope: Scope) -> list[str]:
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    return [value for key, value in parse_qsl(query, keep_blank_values=True) if key == "token"]


class TokenGate:
    """ASGI middleware: only requests carrying ``token`` reach ``app`` (see the module
    table)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def _matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cookie = _cookie_name(scope)
        in_query = _query_tokens(scope)
        authorization = _header(scope, b"authorization") or ""
        bearer = authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""
        stored = _cookies(scope).get(cookie)
        given = [t for t in (*in_query, bearer, stored) if t]
        accepted = [t for t in given if self._matches(t)]  # every candidate: no early exit
        if not accepted:
            await _refuse(scope, send, 403 if given else 401)
            return
        if not any(self._matches(t) for t in in_query):
            await self.app(scope, receive, send)
            return
        value = f"{cookie}={self._token.decode()}; Path=/; HttpOnly; SameSite=Strict"

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (b"set-cookie", value.encode())]
            await send(message)

        await self.app(scope, receive, with_cookie)


def _refusal(status: int) -> str:
    where = (
        "open the address plait ui printed when it started (http://127.0.0.1:PORT/?token=...), "
        "or send the header 'Authorization: Bearer TOKEN'"
    )
    if status == 401:
        return (
            f"This trace page needs its token: {where}. On a single-user machine, "
            f"plait ui --no-token turns the check off; ${TOKEN_ENV} sets a fixed token."
        )
    return (
        f"Wrong token for this trace page (each start of plait ui makes a new one unless "
        f"${TOKEN_ENV} is set): {where}."
    )


async def _refuse(scope: Scope, send: Send, status: int) -> None:
    message = _refusal(status)
    if str(scope.get("path", "")).startswith("/api/"):
        body, kind = json.dumps({"error": message}).encode(), b"application/json"
    else:
        body, kind = (message + "\n").encode(), b"text/plain; charset=utf-8"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="plait ui"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _hashes(html: str, tag: str) -> list[str]:
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.DOTALL)
    digests = (hashlib.sha256(block.encode()).digest() for block in blocks)
    return [f"'sha256-{base64.b64encode(d).decode()}'" for d in digests]


def page_policy(html: str) -> str:
    """The Content-Security-Policy for ``html``: its inline ``<script>`` and ``<style>`` blocks
    by hash (no ``'unsafe-inline'``: the page sets computed styles through the CSSOM, never a
    ``style`` attribute), requests and images (the thumbnails of recorded images) from this
    server only, no frames, forms or base URL."""
    scripts = " ".join(_hashes(html, "script")) or "'none'"
    styles = " ".join(_hashes(html, "style")) or "'none'"
    return (
        f"default-src 'none'; script-src {scripts}; style-src {styles}; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


class SecurityHeaders:
    """ASGI middleware: the module's headers on every answer of ``app`` (``policy`` is the
    Content-Security-Policy, :func:`page_policy`)."""

    def __init__(self, app: ASGIApp, policy: str) -> None:
        self.app = app
        self._headers = [
            (b"content-security-policy", policy.encode()),
            (b"x-frame-options", b"DENY"),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"cache-control", b"no-store"),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *self._headers]
            await send(message)

        await self.app(scope, receive, with_headers)
