"""The errors the server answers with: one JSON shape, ``{"error": {"type", "message"}}``.

A handler raises :class:`ServeError` (or a subclass) with the HTTP status, a short ``type`` a
client can switch on and a message that says what to do; anything else that escapes a handler
answers 500 ``internal_error`` with no traceback (it goes to the server's log).
"""

from __future__ import annotations

from collections.abc import Mapping

from plait.errors import PlaitError

__all__ = ["ServeError"]


class ServeError(PlaitError):
    """A request the server refuses: ``status`` (HTTP), ``type`` (``"not_found"``,
    ``"invalid_request"``, ``"unauthorized"``, ``"body_too_large"``, ``"server_busy"``,
    ``"thread_busy"``, …) and a message for the client; ``headers`` go on the answer (a
    failed run's ``X-Plait-Thread`` and ``X-Plait-Run``, so the client can look it up)."""

    def __init__(
        self, status: int, type: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.headers = dict(headers or {})

    def body(self) -> dict[str, dict[str, str]]:
        """The JSON answer."""
        return {"error": {"type": self.type, "message": self.message}}
