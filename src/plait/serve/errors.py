"""The errors the server answers with: one JSON shape, ``{"error": {"type", "message"}}``.

A handler raises :class:`ServeError` (or a subclass) with the HTTP status, a short ``type`` a
client can switch on and a message that says what to do; anything else that escapes a handler
answers 500 ``internal_error`` with no traceback (it goes to the server's log).
"""

from __future__ import annotations

from plait.errors import PlaitError

__all__ = ["ServeError"]


class ServeError(PlaitError):
    """A request the server refuses: ``status`` (HTTP), ``type`` (``"not_found"``,
    ``"invalid_request"``, ``"unauthorized"``, ``"body_too_large"``, ``"server_busy"``,
    ``"thread_busy"``, …) and a message for the client."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message

    def body(self) -> dict[str, dict[str, str]]:
        """The JSON answer."""
        return {"error": {"type": self.type, "message": self.message}}
