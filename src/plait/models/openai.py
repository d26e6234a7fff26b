"""OpenAI Chat Completions adapter; also any OpenAI-compatible server (vLLM, Ollama, LiteLLM).

Needs the ``openai`` SDK (``pip install 'plait[openai]'``); this module imports without it and
:class:`OpenAIChatModel` raises :class:`~plait.errors.ConfigurationError` when it is missing.

The wire mapping (request body, answers, stream chunks: what goes where) is
:mod:`plait.models.openai_mapping`, whose names this module re-exports; here are the model
(client, retries, streaming, ``stream_options``) and :func:`classify_openai_error` (SDK
exceptions to plait's typed errors).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from plait.errors import ConfigurationError
from plait.models.base import ModelRequest, ModelResponse, ResponseComplete, StreamEvent
from plait.models.openai_cache import OpenAIPromptCache, cache_fields
from plait.models.openai_content import check_openai_content
from plait.models.openai_mapping import (
    MaxTokensKey,
    OpenAIStreamAssembler,
    from_openai_completion,
    to_openai_messages,
    to_openai_request,
    to_openai_tool_choice,
    to_openai_tools,
)
from plait.models.provider_errors import (
    ProviderErrors,
    is_retryable_status,
    mid_response,
    transport_errors,
)
from plait.models.retrying import Backoff, ProviderFailure, call_with_retries, relay_stream
from plait.models.timeouts import ModelTimeouts

if TYPE_CHECKING:
    import openai
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase

__all__ = [
    "OpenAIChatModel",
    "OpenAIStreamAssembler",
    "classify_openai_error",
    "from_openai_completion",
    "new_openai_client",
    "reuse_openai_client",
    "to_openai_messages",
    "to_openai_request",
    "to_openai_tool_choice",
    "to_openai_tools",
]


_OVERFLOW = re.compile(r"context (length|window)", re.IGNORECASE)
_ENCRYPTED = re.compile(r"encrypted content", re.IGNORECASE)


class OpenAIChatModel:
    """A :class:`~plait.models.Model` over ``openai.AsyncOpenAI`` Chat Completions.

    ``base_url`` points it at any OpenAI-compatible server; give such a server its own
    ``provider_label`` (``"openai-compatible"`` from :func:`~plait.models.registry.resolve_model`)
    so names, errors and the API-key hint (``<LABEL>_API_KEY``) say which server failed.
    ``client`` reuses an existing ``AsyncOpenAI`` (its own retries are turned off, its timeouts
    replaced by ``timeouts``). Retries follow :mod:`plait.models.retrying`: up to ``max_retries``,
    waits from ``backoff``.

    ``stream_usage`` decides whether a stream asks for its usage (``stream_options:
    {"include_usage": true}``, a last chunk with the token counts). ``None`` (the default) asks,
    and when the server answers 400 (or 422) naming ``stream_options`` (some OpenAI-compatible
    servers refuse fields they do not know) asks once more at once without it, and once that is
    served never again on this model instance (:attr:`stream_usage_refused`; a request refused
    without it too is not remembered: the error only quoted the field); such streams report no
    usage unless the server sends it anyway. ``True`` always asks (a refusal is the error);
    ``False`` never asks.

    ``prompt_cache`` sends ``prompt_cache_key`` (the thread id by default) and, when set,
    ``prompt_cache_retention``, to OpenAI itself only (:mod:`plait.models.openai_cache`);
    ``None`` sends neither.
    """

    supports_native_output = True
    """``response_format`` with a strict JSON schema (structured output); for a compatible
    server without it, run the agent with ``output_mode="tool"``."""
    reasoning_provider = "openai-chat"
    """Chat Completions has no reasoning items: any reasoning part in a request is dropped (the
    agent's ``ReasoningDropped`` event says so)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: AsyncOpenAI | None = None,
        max_retries: int = 3,
        timeouts: ModelTimeouts | None = None,
        backoff: Backoff | None = None,
        provider_label: str = "openai",
        stream_usage: bool | None = None,
        prompt_cache: OpenAIPromptCache | None = OpenAIPromptCache(),  # noqa: B008 - frozen
    ) -> None:
        if not (stream_usage is None or isinstance(stream_usage, bool)):
            raise ConfigurationError(
                "OpenAIChatModel: stream_usage must be True, False or None (ask, and stop asking "
                f"if the server refuses), not {stream_usage!r}."
            )
        self.model = model
        self.prompt_cache = prompt_cache
        self.stream_usage = stream_usage
        self.stream_usage_refused = False
        """Whether the server refused ``stream_options`` (``stream_usage=None``): later streams
        of this instance do not send it."""
        self.provider_label = provider_label
        self.max_retries = max_retries
        self.backoff = backoff or Backoff()
        self.timeouts = timeouts or ModelTimeouts()
        self.base_url = base_url
        self.api_key_env = (
            "OPENAI_API_KEY"
            if provider_label == "openai"
            else f"{provider_label.upper().replace('-', '_')}_API_KEY"
        )
        self._max_tokens_key: MaxTokensKey = (
            "max_completion_tokens" if provider_label == "openai" else "max_tokens"
        )
        self._errors = ProviderErrors(
            self.name, provider_label, self.api_key_env, base_url, "OpenAI"
        )
        self._owns_client = client is None
        self._client = (
            reuse_openai_client(client, self.timeouts)
            if client
            else new_openai_client(self, api_key=api_key, base_url=base_url)
        )

    @property
    def name(self) -> str:
        return f"{self.provider_label}:{self.model}"

    def request_body(self, request: ModelRequest) -> CompletionCreateParamsBase:
        """The JSON body this model sends for ``request`` (without ``stream``), with
        ``request.extra`` (provider-specific fields) on top as ``extra_body``.

        Against OpenAI itself (``provider_label="openai"``) the conversation's images and files
        are first checked against OpenAI's limits (:mod:`plait.models.openai_content`; a
        :class:`~plait.errors.ContentError`); a compatible server judges its own."""
        if self.provider_label == "openai":
            check_openai_content(request.messages, model=self.name)
        params = to_openai_request(request, model=self.model, max_tokens_key=self._max_tokens_key)
        fields: Any = cache_fields(request, self.prompt_cache, self._client.base_url)
        params.update(fields)
        if request.extra:
            params["extra_body"] = dict(request.extra)  # type: ignore[typeddict-unknown-key]
        return params

    async def generate(self, request: ModelRequest) -> ModelResponse:
        from openai.types.chat import ChatCompletion as ChatCompletionType

        params = self.request_body(request)
        deadline = self.timeouts.start(self.name)
        completion: ChatCompletion = await call_with_retries(
            lambda: self._client.chat.completions.create(**params, stream=False),
            self._classify,
            max_retries=self.max_retries,
            backoff=self.backoff,
            deadline=deadline,
        )
        # The SDK hands over a body of another shape as it is (text/html as a str).
        if not isinstance(completion, ChatCompletionType) or not isinstance(
            getattr(completion, "choices", None), list
        ):
            raise self._errors.not_an_answer(completion)
        return from_openai_completion(completion)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream the answer. Opening the stream is retried; a failure mid-stream is raised as a
        typed error without retrying (events were already delivered), and so is a stream that
        ends without a ``finish_reason`` (cut short by a proxy or a restarting server)."""
        import openai

        params = self.request_body(request)
        deadline = self.timeouts.start(self.name)
        if self.stream_usage or (self.stream_usage is None and not self.stream_usage_refused):
            params["stream_options"] = {"include_usage": True}
        chunks = await call_with_retries(
            lambda: self._open_stream(params),
            self._classify,
            max_retries=self.max_retries,
            backoff=self.backoff,
            deadline=deadline,
        )
        assembler = OpenAIStreamAssembler()
        relayed = relay_stream(
            chunks,
            assembler,
            self._classify_mid_stream,
            (openai.APIError, json.JSONDecodeError, *transport_errors()),
            deadline,
        )
        async for event in relayed:
            if isinstance(event, ResponseComplete) and not assembler.finished:
                raise self._errors.cut_short()
            yield event

    async def _open_stream(self, params: CompletionCreateParamsBase) -> Any:
        """Open the stream; with ``stream_usage=None``, a 400 (or a validating server's 422)
        naming ``stream_options`` is answered by asking once more without it; the refusal is
        remembered only once that is served (a validator that echoes the whole body quotes the
        field in errors about something else: then the next stream asks again)."""
        import openai

        try:
            return await self._client.chat.completions.create(**params, stream=True)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            asked = "stream_options" in params and self.stream_usage is None
            if not asked or "stream_options" not in f"{_error_message(exc)} {exc.body}":
                raise
        params.pop("stream_options")
        opened = await self._client.chat.completions.create(**params, stream=True)
        self.stream_usage_refused = True  # refused with it, served without it
        return opened

    async def aclose(self) -> None:
        """Close the HTTP client this model created (a ``client`` passed in stays open)."""
        if self._owns_client:
            await self._client.close()

    def _classify(self, exc: Exception) -> ProviderFailure | None:
        return classify_openai_error(exc, self._errors)

    def _classify_mid_stream(self, exc: Exception) -> ProviderFailure | None:
        return classify_openai_error(exc, self._errors, mid_stream=True)


def reuse_openai_client(client: AsyncOpenAI, timeouts: ModelTimeouts) -> AsyncOpenAI:
    """A copy of ``client`` (sharing its connections) without retries and with ``timeouts``, so
    the connect/read bounds hold (and the deadline's message tells the truth)."""
    import openai

    return client.with_options(max_retries=0, timeout=timeouts.sdk_timeout(openai.Timeout))


class _ClientOwner(Protocol):
    @property
    def name(self) -> str: ...

    timeouts: ModelTimeouts
    api_key_env: str


def new_openai_client(
    model: _ClientOwner, *, api_key: str | None, base_url: str | None
) -> AsyncOpenAI:
    """An ``AsyncOpenAI`` for ``model`` (its timeouts, no SDK retries: plait retries).

    Raises :class:`ConfigurationError` when the SDK is missing or finds no API key."""
    try:
        import openai
    except ImportError as exc:
        raise ConfigurationError(
            f"{type(model).__name__} needs the OpenAI SDK: pip install 'plait[openai]'"
        ) from exc
    try:
        return openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=model.timeouts.sdk_timeout(openai.Timeout),
        )
    except openai.OpenAIError as exc:
        raise ConfigurationError(
            f"No API key for {model.name}: set {model.api_key_env} or pass api_key=... ({exc})"
        ) from exc


def classify_openai_error(
    exc: Exception, errors: ProviderErrors, *, mid_stream: bool = False
) -> ProviderFailure | None:
    """The plait failure for an ``openai`` SDK exception; ``None`` for anything else.

    Context overflow is a 400 with code ``context_length_exceeded`` or a message about the
    context length (how vLLM and other compatible servers say it), or any 413 (the body is over
    the server's or a proxy's size limit: the conversation must shrink); a 429 with code
    ``insufficient_quota`` is not retried, since waiting does not add credit.
    """
    import openai

    if isinstance(exc, openai.APIConnectionError):
        # Some SDK versions wrap a connection that breaks while the body streams in their own.
        return errors.connection(mid_response(exc.message) if mid_stream else exc.message)
    if isinstance(exc, json.JSONDecodeError):  # the SDK parses bodies and events unchecked
        return errors.malformed(str(exc))
    if isinstance(exc, transport_errors()):
        # Some SDK versions let the HTTP library's error through when a stream breaks mid-way.
        return errors.connection(mid_response(f"{type(exc).__name__}: {exc}"))
    if not isinstance(exc, openai.APIError):
        return None
    if not isinstance(exc, openai.APIStatusError):
        return errors.other(exc.message)
    status = exc.status_code
    detail = _error_message(exc)
    if status == 413 or (
        status == 400 and (exc.code == "context_length_exceeded" or _OVERFLOW.search(detail))
    ):
        return errors.context_overflow(status, detail)
    if status in (401, 403):
        return errors.credentials(status, detail)
    retryable = is_retryable_status(status)
    if status == 400 and (exc.code == "invalid_encrypted_content" or _ENCRYPTED.search(detail)):
        detail += (
            " A reasoning item sent back (a ReasoningPart's payload) is not the one the API "
            "issued: middleware must not edit reasoning parts, and a thread cannot move them "
            "between organizations or models."
        )
    if status == 429 and exc.code == "insufficient_quota":
        retryable = False
        detail += " Check the account's plan and billing; retrying will not help."
    return errors.status(status, detail, exc.response.headers, retryable=retryable)


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body:  # an error page (a proxy's): the SDK leaves it out
        return f"{exc.message} - {body}"
    return exc.message
