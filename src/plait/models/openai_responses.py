"""OpenAI Responses API adapter (``client.responses.create``): reasoning items carried from one
call to the next, images and files in, function tools, streaming.

Needs the ``openai`` SDK (``pip install 'plait[openai]'``); this module imports without it and
:class:`OpenAIResponsesModel` raises :class:`~plait.errors.ConfigurationError` when it is
missing. The wire mapping is :mod:`plait.models.openai_responses_mapping`; client creation,
retries and error classification are shared with
:class:`~plait.models.openai.OpenAIChatModel`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from plait.models.base import ModelRequest, ModelResponse, ResponseComplete, StreamEvent
from plait.models.openai import classify_openai_error, new_openai_client, reuse_openai_client
from plait.models.openai_cache import OpenAIPromptCache, cache_fields
from plait.models.openai_content import check_openai_content
from plait.models.openai_responses_mapping import (
    PROVIDER,
    ResponseFailed,
    ResponsesStreamAssembler,
    from_responses_response,
    to_responses_request,
)
from plait.models.provider_errors import ProviderErrors, transport_errors
from plait.models.retrying import Backoff, ProviderFailure, call_with_retries, relay_stream
from plait.models.timeouts import ModelTimeouts

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIResponsesModel"]


class OpenAIResponsesModel:
    """A :class:`~plait.models.Model` over ``openai.AsyncOpenAI`` Responses.

    Stateless by default: ``store=False`` (OpenAI keeps nothing) with ``include=
    ["reasoning.encrypted_content"]``, so each reasoning item comes back encrypted, is kept on
    the assistant message as a :class:`~plait.parts.ReasoningPart` (provider
    ``"openai-responses"``) and is sent back verbatim on the next call, where the model needs it
    to continue a tool loop. A model without reasoning that refuses ``include`` is given
    ``include=()``. ``ModelRequest.reasoning`` sets ``reasoning.effort`` and
    ``reasoning.summary``; ``ModelRequest.extra`` is sent as ``extra_body``.

    Images and files are checked against OpenAI's limits before any request is sent
    (:mod:`plait.models.openai_content`, a :class:`~plait.errors.ContentError` naming the limit).
    ``base_url``, ``client``, ``max_retries``, ``timeouts`` and ``backoff`` work as for
    :class:`~plait.models.openai.OpenAIChatModel`, and so does ``prompt_cache``
    (:mod:`plait.models.openai_cache`).
    """

    supports_native_output = True
    """``text.format`` with a strict JSON schema (structured output)."""
    reasoning_provider = PROVIDER
    """Reasoning parts of another provider are dropped from requests (``ReasoningDropped``)."""

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
        store: bool = False,
        include: Sequence[str] = ("reasoning.encrypted_content",),
        provider_label: str = "openai-responses",
        prompt_cache: OpenAIPromptCache | None = OpenAIPromptCache(),  # noqa: B008 - frozen
    ) -> None:
        self.model = model
        self.prompt_cache = prompt_cache
        self.store = store
        self.include = tuple(include)
        self.provider_label = provider_label
        self.max_retries = max_retries
        self.backoff = backoff or Backoff()
        self.timeouts = timeouts or ModelTimeouts()
        self.base_url = base_url
        self.api_key_env = "OPENAI_API_KEY"
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

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body this model sends for ``request`` (without ``stream`` and ``extra``).

        Raises :class:`~plait.errors.ContentError` when the conversation's images or files break
        OpenAI's limits."""
        check_openai_content(request.messages, model=self.name)
        body = to_responses_request(
            request, model=self.model, store=self.store, include=self.include
        )
        body.update(cache_fields(request, self.prompt_cache, self._client.base_url))
        return body

    async def generate(self, request: ModelRequest) -> ModelResponse:
        from openai.types.responses import Response

        params = self.request_body(request)
        extra = dict(request.extra) or None
        deadline = self.timeouts.start(self.name)
        answer: Any = await call_with_retries(
            lambda: self._client.responses.create(**params, stream=False, extra_body=extra),
            self._classify,
            max_retries=self.max_retries,
            backoff=self.backoff,
            deadline=deadline,
        )
        # The SDK hands over a body of another shape as it is (text/html as a str).
        if not isinstance(answer, Response) or not isinstance(
            getattr(answer, "output", None), list
        ):
            raise self._errors.not_an_answer(answer)
        try:
            return from_responses_response(answer)
        except ResponseFailed as exc:
            raise self._failed(exc) from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream the answer. Opening the stream is retried; a failure mid-stream (an ``error``
        or ``response.failed`` event included) is raised as a typed error without retrying, and
        so is a stream that ends before ``response.completed`` (cut short)."""
        import openai

        params = self.request_body(request)
        extra = dict(request.extra) or None
        deadline = self.timeouts.start(self.name)
        events = await call_with_retries(
            lambda: self._client.responses.create(**params, stream=True, extra_body=extra),
            self._classify,
            max_retries=self.max_retries,
            backoff=self.backoff,
            deadline=deadline,
        )
        assembler = ResponsesStreamAssembler()
        relayed = relay_stream(
            events,
            assembler,
            self._classify_mid_stream,
            (openai.APIError, json.JSONDecodeError, ResponseFailed, *transport_errors()),
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

    def _failed(self, exc: ResponseFailed) -> Exception:
        return self._errors.other(exc.message, retryable=exc.retryable).error

    def _classify(self, exc: Exception, *, mid_stream: bool = False) -> ProviderFailure | None:
        if isinstance(exc, ResponseFailed):
            return self._errors.other(exc.message, retryable=exc.retryable)
        return classify_openai_error(exc, self._errors, mid_stream=mid_stream)

    def _classify_mid_stream(self, exc: Exception) -> ProviderFailure | None:
        return self._classify(exc, mid_stream=True)
