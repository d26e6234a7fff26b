"""Anthropic Messages adapter.

Needs the ``anthropic`` SDK (``pip install 'plait[anthropic]'``); this module imports without it
and :class:`AnthropicModel` raises :class:`~plait.errors.ConfigurationError` when it is missing.

The wire mapping (request body, answers, stream events: what goes where) is
:mod:`plait.models.anthropic_mapping`, whose names this module re-exports; here are the model
(client, retries, streaming) and :func:`classify_anthropic_error` (SDK exceptions to plait's
typed errors).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError
from plait.models.anthropic_cache import AnthropicCache, place_breakpoints, projected_block_count
from plait.models.anthropic_mapping import (
    PROVIDER,
    AnthropicStreamAssembler,
    from_anthropic_message,
    to_anthropic_headers,
    to_anthropic_messages,
    to_anthropic_request,
    to_anthropic_tool_choice,
    to_anthropic_tools,
)
from plait.models.base import ModelRequest, ModelResponse, ResponseComplete, StreamEvent
from plait.models.provider_errors import (
    ProviderErrors,
    is_retryable_status,
    mid_response,
    transport_errors,
)
from plait.models.retrying import Backoff, ProviderFailure, call_with_retries, relay_stream
from plait.models.timeouts import ModelTimeouts

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message
    from anthropic.types.message_create_params import MessageCreateParamsBase

__all__ = [
    "AnthropicModel",
    "AnthropicStreamAssembler",
    "classify_anthropic_error",
    "from_anthropic_message",
    "to_anthropic_headers",
    "to_anthropic_messages",
    "to_anthropic_request",
    "to_anthropic_tool_choice",
    "to_anthropic_tools",
]


_OVERFLOW = re.compile(r"too long|context limit|context window", re.IGNORECASE)
_RETRYABLE = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


class AnthropicModel:
    """A :class:`~plait.models.Model` over ``anthropic.AsyncAnthropic`` Messages.

    ``max_tokens`` is the default answer budget (the API requires one); a request's own
    ``max_tokens`` wins. ``client`` reuses an existing ``AsyncAnthropic`` (its own retries are
    turned off, its timeouts replaced by ``timeouts``). Retries follow
    :mod:`plait.models.retrying`: up to ``max_retries``, waits from ``backoff``.

    A request's ``reasoning`` turns extended thinking on (:mod:`plait.models.anthropic_thinking`);
    thinking blocks come back as reasoning parts and are replayed verbatim. Settings the API
    refuses raise :class:`~plait.errors.ConfigurationError` and images or files over its limits
    :class:`~plait.errors.ContentError`, both before anything is sent.

    ``cache`` asks Anthropic to cache the prompt: ``cache_control`` breakpoints on the tools,
    the system prompt and the newest stable messages, 5-minute TTL by default
    (:mod:`plait.models.anthropic_cache`); ``cache=None`` sends none.
    """

    provider_label = "anthropic"
    supports_native_output = True
    """``output_config.format`` (structured outputs; Claude Sonnet 4.5, Opus 4.1, Haiku 4.5 and
    later): for an older model, run the agent with ``output_mode="tool"``."""
    reasoning_provider = PROVIDER
    """The ``provider`` of the reasoning parts this model makes and replays (others are
    dropped from its requests; the runtime reports them with ``ReasoningDropped``)."""
    api_key_env = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: AsyncAnthropic | None = None,
        max_tokens: int = 4096,
        max_retries: int = 3,
        timeouts: ModelTimeouts | None = None,
        backoff: Backoff | None = None,
        cache: AnthropicCache | None = AnthropicCache(),  # noqa: B008 - frozen, shared
    ) -> None:
        if cache is not None and not isinstance(cache, AnthropicCache):
            raise ConfigurationError(
                f"AnthropicModel: cache must be an AnthropicCache or None, not {cache!r}."
            )
        self.cache = cache
        self.model = model
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.backoff = backoff or Backoff()
        self.timeouts = timeouts or ModelTimeouts()
        self.base_url = base_url
        self._api_key = api_key
        self._errors = ProviderErrors(
            self.name, "anthropic", self.api_key_env, base_url, "Anthropic"
        )
        self._owns_client = client is None
        self._client = self._reuse(client) if client else self._new_client()

    def _reuse(self, client: AsyncAnthropic) -> AsyncAnthropic:
        """A copy of ``client`` (sharing its connections) without retries and with these
        timeouts, so the connect/read bounds hold (and the deadline's message tells the truth)."""
        import anthropic

        timeout = self.timeouts.sdk_timeout(anthropic.Timeout)
        return client.with_options(max_retries=0, timeout=timeout)

    def _new_client(self) -> AsyncAnthropic:
        try:
            import anthropic
        except ImportError as exc:
            raise ConfigurationError(
                "AnthropicModel needs the Anthropic SDK: pip install 'plait[anthropic]'"
            ) from exc
        missing = f"No credentials for {self.name}: set {self.api_key_env} or pass api_key=... ."
        try:
            client = anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self.base_url,
                max_retries=0,
                timeout=self.timeouts.sdk_timeout(anthropic.Timeout),
            )
        except anthropic.AnthropicError as exc:
            raise ConfigurationError(f"{missing} ({exc})") from exc
        # The SDK resolves credentials (key, token, profile) here but only complains, with a
        # TypeError, at the first request; fail now with the variable to set instead.
        credentials = (client.api_key, client.auth_token, getattr(client, "credentials", None))
        if all(found is None for found in credentials):
            raise ConfigurationError(missing)
        return client

    @property
    def name(self) -> str:
        return f"anthropic:{self.model}"

    def request_body(
        self, request: ModelRequest
    ) -> tuple[MessageCreateParamsBase, dict[str, object]]:
        """``(params, extra_body)`` this model sends for ``request`` (without ``stream``), its
        cache breakpoints placed."""
        params, extra = to_anthropic_request(request, model=self.model, max_tokens=self.max_tokens)
        if self.cache is not None:
            body: Any = params
            place_breakpoints(body, request, self.cache, projected_block_count(request))
        return params, extra

    async def generate(self, request: ModelRequest) -> ModelResponse:
        from anthropic.types import Message as MessageType

        params, extra = self.request_body(request)
        headers = to_anthropic_headers(request) or None
        deadline = self.timeouts.start(self.name)
        message: Message = await call_with_retries(
            lambda: self._client.messages.create(
                **params, extra_body=extra or None, extra_headers=headers, stream=False
            ),
            self._classify,
            max_retries=self.max_retries,
            backoff=self.backoff,
            deadline=deadline,
        )
        # The SDK hands over a body of another shape as it is (text/html as a str).
        if not isinstance(message, MessageType) or not isinstance(
            getattr(message, "content", None), list
        ):
            raise self._errors.not_an_answer(message)
        return from_anthropic_message(message)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream the answer. Opening the stream is retried; a failure mid-stream (including an
        ``error`` event) is raised as a typed error without retrying, and so is a stream that ends
        without a ``stop_reason`` (cut short by a proxy or a restarting server)."""
        import anthropic

        params, extra = self.request_body(request)
        headers = to_anthropic_headers(request) or None
        deadline = self.timeouts.start(self.name)
        events = await call_with_retries(
            lambda: self._client.messages.create(
                **params, extra_body=extra or None, extra_headers=headers, stream=True
            ),
            self._classify,
            max_retries=self.max_retries,
            backoff=self.backoff,
            deadline=deadline,
        )
        assembler = AnthropicStreamAssembler()
        relayed = relay_stream(
            events,
            assembler,
            self._classify_mid_stream,
            (anthropic.AnthropicError, json.JSONDecodeError, *transport_errors()),
            deadline,
        )
        async for event in relayed:
            if isinstance(event, ResponseComplete) and not assembler.finished:
                raise self._errors.cut_short()
            yield event

    async def aclose(self) -> None:
        """Close the HTTP client this model created (a ``client`` passed in stays open)."""
        if self._owns_client:
            await self._client.close()

    def _classify(self, exc: Exception) -> ProviderFailure | None:
        return classify_anthropic_error(exc, self._errors)

    def _classify_mid_stream(self, exc: Exception) -> ProviderFailure | None:
        return classify_anthropic_error(exc, self._errors, mid_stream=True)


def classify_anthropic_error(
    exc: Exception, errors: ProviderErrors, *, mid_stream: bool = False
) -> ProviderFailure | None:
    """The plait failure for an ``anthropic`` SDK exception; ``None`` for anything else.
    ``mid_stream``: raised while a stream's body was read, so a connection error means the
    connection broke mid-response (the server was reached).

    Context overflow is a 400 ``invalid_request_error`` whose message says the prompt is too
    long or exceeds the context limit, or a 413 (``request_too_large``: the body is over the
    API's byte limit, or a proxy's error page said so): either way the conversation must
    shrink, and retrying the same request cannot help. A stream's ``error`` event arrives on a
    200 response, so its error type (``overloaded_error``, ``api_error``, ...) also decides
    whether it is retryable.
    """
    import anthropic

    if isinstance(exc, anthropic.APIConnectionError):
        # Newer SDKs wrap a connection that breaks while the body streams in their own error.
        return errors.connection(mid_response(exc.message) if mid_stream else exc.message)
    if isinstance(exc, json.JSONDecodeError):  # the SDK parses bodies and events unchecked
        return errors.malformed(str(exc))
    if isinstance(exc, transport_errors()):
        # The SDK lets the HTTP library's error through when a stream breaks mid-way.
        return errors.connection(mid_response(f"{type(exc).__name__}: {exc}"))
    if isinstance(exc, anthropic.CredentialsError):
        return errors.credentials(None, str(exc))
    if not isinstance(exc, anthropic.APIError):
        return None
    if not isinstance(exc, anthropic.APIStatusError):
        return errors.other(exc.message)
    status = exc.status_code
    kind = exc.type or "error"
    detail = exc.api_message or exc.message
    if status < 400:
        return errors.other(f"{kind} during the stream: {detail}", retryable=kind in _RETRYABLE)
    if status == 413 or (
        status == 400 and kind == "invalid_request_error" and _OVERFLOW.search(detail)
    ):
        return errors.context_overflow(status, detail)
    if status in (401, 403):
        return errors.credentials(status, detail)
    retryable = is_retryable_status(status) or kind in _RETRYABLE
    return errors.status(status, f"{kind}: {detail}", exc.response.headers, retryable=retryable)
