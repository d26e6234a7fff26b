"""The typed errors a provider adapter raises, with messages that say what to do next.

Each adapter decides *which* case an SDK exception is (its SDK names things differently); this
module words the error the same way for every provider:

=======================  ===================================================  ==============
case                     error                                                retryable
=======================  ===================================================  ==============
connection failed        ``ProviderError`` "Could not reach ..."              yes
                         (also an HTTP transport error mid-stream, see
                         :func:`transport_errors`)
credentials rejected     ``ProviderError`` naming the API-key variable        no
(401), or lacking        (403: "refused access", check the key's permissions)
permission (403)
context window overflow  ``ContextOverflowError``, the provider's message     no
any other HTTP status    ``ProviderError``, the provider's message            per status (1)
error inside a stream    ``ProviderError``, the provider's message            per error type
reply not valid JSON     ``ProviderError`` "... not valid JSON"               no
reply of another shape   ``ProviderError`` "... not a model answer"           no
stream cut short         ``ProviderError`` "... ended before the model        yes (2)
                         finished"
=======================  ===================================================  ==============

A provider's own message (or an error page) is repeated up to ``MAX_DETAIL_CHARS`` characters.

(1) 408, 409, 429 and 5xx are retryable, unless the server's ``x-should-retry`` header says
otherwise.
(2) A stream whose body ended without the provider's finish reason (``finish_reason``,
``stop_reason``): a proxy or server cut it short. It is raised, not retried, since its events
were already delivered; running the turn again may succeed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

from plait.errors import ContextOverflowError, ProviderError, clipped, quoted
from plait.models.retrying import ProviderFailure, retry_after_seconds, server_retry_hint

__all__ = [
    "MAX_DETAIL_CHARS",
    "ProviderErrors",
    "is_retryable_status",
    "mid_response",
    "transport_errors",
]


MAX_DETAIL_CHARS = 1000
"""How much of a provider's own message (or error page) an error repeats; the rest is counted."""


def is_retryable_status(status: int) -> bool:
    """Request timeout, conflict (lock contention), rate limit, and every server error."""
    return status in (408, 409, 429) or status >= 500


def transport_errors() -> tuple[type[Exception], ...]:
    """The transport-failure base classes of the HTTP libraries the SDKs run on (``httpx``, or
    its ``httpx2`` fork), among those already imported.

    Some SDK versions wrap a connection that breaks while a response streams in their own
    connection error; others let the HTTP library's error through (a dropped connection, a read
    timeout), which must still become a typed :class:`~plait.errors.ProviderError`.
    """
    found: list[type[Exception]] = []
    for name in ("httpx", "httpx2"):
        error = getattr(sys.modules.get(name), "TransportError", None)
        if isinstance(error, type) and issubclass(error, Exception):
            found.append(error)
    return tuple(found)


def mid_response(detail: str) -> str:
    """How a connection that broke while a response streamed in is described (the server was
    reached: "Could not reach" alone would send the user looking for the wrong fault)."""
    return f"the connection failed mid-response ({detail})."


@dataclass(frozen=True, slots=True)
class ProviderErrors:
    """Builds the failures of one model endpoint.

    ``model_name`` is the model's label (``openai:gpt-4.1-mini``), ``provider`` goes on every
    error, ``base_url`` is set for a non-default server and ``api_key_env`` is the variable that
    holds its key.
    """

    model_name: str
    provider: str
    api_key_env: str
    base_url: str | None = None
    default_host: str = "the provider"

    def connection(self, detail: str) -> ProviderFailure:
        detail = clipped(detail, MAX_DETAIL_CHARS)
        where = f"the server at {self.base_url}" if self.base_url else self.default_host
        return ProviderFailure(
            ProviderError(
                f"Could not reach {where} for {self.model_name}: {detail} "
                "Check the network, or that the server is running.",
                provider=self.provider,
                retryable=True,
            )
        )

    def credentials(self, status: int | None, detail: str) -> ProviderFailure:
        """401 (or no status: the SDK found no credentials) means the key is wrong; 403 means the
        key was accepted but may not use this model, region or feature."""
        detail = clipped(detail, MAX_DETAIL_CHARS)
        where = f"The server at {self.base_url}" if self.base_url else self.default_host
        if status == 403:
            message = (
                f"{where} refused access to {self.model_name} (403: {detail}). The key was "
                "accepted but lacks permission: check the key's project, organisation or region "
                f"access to this model, or set {self.api_key_env} to a key that has it."
            )
        else:
            code = f"{status}: " if status is not None else ""
            message = (
                f"{where} rejected the credentials for {self.model_name} ({code}{detail}). "
                f"Set {self.api_key_env} to a valid key, or pass api_key=... ."
            )
        return ProviderFailure(ProviderError(message, provider=self.provider, status=status))

    def context_overflow(self, status: int, detail: str) -> ProviderFailure:
        detail = clipped(detail, MAX_DETAIL_CHARS)
        return ProviderFailure(
            ContextOverflowError(
                f"The request is too long for {self.model_name}'s context window: {detail} "
                "Shorten the conversation (e.g. with SummarizationMiddleware) or lower max_tokens.",
                provider=self.provider,
                status=status,
            )
        )

    def status(
        self, status: int, detail: str, headers: Mapping[str, str], *, retryable: bool
    ) -> ProviderFailure:
        detail = clipped(detail, MAX_DETAIL_CHARS)
        hint = server_retry_hint(headers)
        return ProviderFailure(
            ProviderError(
                f"{self.model_name} failed with HTTP {status}: {detail}",
                provider=self.provider,
                status=status,
                retryable=retryable if hint is None else hint,
            ),
            retry_after=retry_after_seconds(headers),
        )

    def cut_short(self) -> ProviderError:
        """The error for a stream that ended without a finish reason (see the table, (2))."""
        return ProviderError(
            f"The stream from {self.model_name} ended before the model finished (no finish "
            "reason came), so the answer may be cut off. Run again; if it keeps happening, check "
            "proxies or load balancers between plait and the server for a response timeout.",
            provider=self.provider,
            retryable=True,
        )

    def malformed(self, detail: str) -> ProviderFailure:
        """A reply (a whole answer or a stream event) that is not valid JSON."""
        detail = clipped(detail, MAX_DETAIL_CHARS)
        where = f"the server at {self.base_url}" if self.base_url else self.default_host
        return ProviderFailure(
            ProviderError(
                f"{self.model_name}: {where} sent a reply that is not valid JSON ({detail}). "
                "Check that the base URL points at the provider's API and that no proxy in "
                "between rewrites its replies.",
                provider=self.provider,
            )
        )

    def not_an_answer(self, reply: object) -> ProviderError:
        """A reply of another shape: a web page, or JSON that is not the API's answer."""
        where = f"the server at {self.base_url}" if self.base_url else self.default_host
        shown = quoted(reply if isinstance(reply, str) else repr(reply))
        return ProviderError(
            f"{self.model_name}: {where} sent a reply that is not a model answer: {shown}. "
            "Check that the base URL points at the provider's API and that no proxy or captive "
            "portal in between answers instead.",
            provider=self.provider,
        )

    def other(self, detail: str, *, retryable: bool = False) -> ProviderFailure:
        """A failure with no HTTP status to go by, such as an error event inside a stream."""
        detail = clipped(detail, MAX_DETAIL_CHARS)
        return ProviderFailure(
            ProviderError(
                f"{self.model_name} failed: {detail}", provider=self.provider, retryable=retryable
            )
        )
