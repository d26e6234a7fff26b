"""``LanguageModelMiddleware``: wrapping at the provider layer (the AI SDK v3 shape).

Orchestrator middleware (:mod:`plait.middleware`) sees the turn; language-model middleware sees
only the model: it reshapes parameters (``transform_params``), wraps one generation
(``wrap_generate``) or wraps a stream (``wrap_stream``). :func:`wrap_model` applies a list of them
to any :class:`~plait.models.base.Model` and returns a model; the first middleware is outermost
(its ``transform_params`` runs first and its wrappers see the final result)::

    model = wrap_model(OpenAIChatModel("gpt-4.1-mini"), DefaultTemperature(0.2), LogCalls())
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal

from plait.models.base import Model, ModelRequest, ModelResponse, StreamEvent

__all__ = ["LanguageModelMiddleware", "WrappedModel", "wrap_model"]

CallKind = Literal["generate", "stream"]
DoGenerate = Callable[[], Awaitable[ModelResponse]]
DoStream = Callable[[], AsyncIterator[StreamEvent]]


class LanguageModelMiddleware:
    """Override any of the three seams; the defaults pass everything through."""

    async def transform_params(self, request: ModelRequest, kind: CallKind) -> ModelRequest:
        return request

    async def wrap_generate(
        self, do_generate: DoGenerate, request: ModelRequest, model: Model
    ) -> ModelResponse:
        return await do_generate()

    def wrap_stream(
        self, do_stream: DoStream, request: ModelRequest, model: Model
    ) -> AsyncIterator[StreamEvent]:
        return do_stream()


class WrappedModel:
    """A model seen through one :class:`LanguageModelMiddleware` (build it with
    :func:`wrap_model`)."""

    def __init__(self, model: Model, middleware: LanguageModelMiddleware) -> None:
        self.inner = model
        self.middleware = middleware

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def timeouts(self) -> object:
        """The wrapped model's own deadline (``ModelTimeouts`` for the adapters), else ``None``:
        the agent then does not time the call a second time (see
        :func:`~plait.models.timeouts.agent_deadline`)."""
        return getattr(self.inner, "timeouts", None)

    @property
    def reasoning_provider(self) -> str | None:
        """The wrapped model's ``reasoning_provider`` (whose reasoning parts it replays)."""
        return getattr(self.inner, "reasoning_provider", None)

    async def generate(self, request: ModelRequest) -> ModelResponse:
        request = await self.middleware.transform_params(request, "generate")

        async def do_generate() -> ModelResponse:
            return await self.inner.generate(request)

        return await self.middleware.wrap_generate(do_generate, request, self.inner)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        request = await self.middleware.transform_params(request, "stream")

        def do_stream() -> AsyncIterator[StreamEvent]:
            return self.inner.stream(request)

        async for event in self.middleware.wrap_stream(do_stream, request, self.inner):
            yield event

    async def aclose(self) -> None:
        """Close the wrapped model."""
        await self.inner.aclose()


def wrap_model(model: Model, *middleware: LanguageModelMiddleware) -> Model:
    """Apply ``middleware`` to ``model``; the first one listed is outermost."""
    for m in reversed(middleware):
        model = WrappedModel(model, m)
    return model
