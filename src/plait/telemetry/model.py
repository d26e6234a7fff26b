"""``ModelTelemetry``: a ``chat`` span for each call of a model used outside the agent's loop.

A battery that calls a model itself (``ModelSummarizer``) does not go through the agent's
``wrap_model_call``; wrap that model with :meth:`GenAITelemetry.instrument` and each of its calls
gets a ``chat {model}`` span under whatever span is current (the turn's ``invoke_agent``, or the
``chat`` span of the agent call whose overflow caused it). A stream is relayed event by event;
its span ends when the stream does, with ``gen_ai.request.stream`` true and the time to its
first event as ``gen_ai.response.time_to_first_chunk``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

from plait.models.base import Model, ModelRequest, ModelResponse, ResponseComplete, StreamEvent
from plait.models.language_model import DoGenerate, DoStream, LanguageModelMiddleware
from plait.telemetry.instruments import Instruments

__all__ = ["ModelTelemetry"]


class ModelTelemetry(LanguageModelMiddleware):
    """Opens a ``chat`` span per generation or stream; ``instruments()`` returning ``None``
    (telemetry off) passes the call through untouched."""

    def __init__(self, instruments: Callable[[], Instruments | None]) -> None:
        self._instruments = instruments

    async def wrap_generate(
        self, do_generate: DoGenerate, request: ModelRequest, model: Model
    ) -> ModelResponse:
        instruments = self._instruments()
        if instruments is None:
            return await do_generate()

        async def call(_: ModelRequest) -> ModelResponse:
            return await do_generate()

        return await instruments.chat(request, model, call)

    async def wrap_stream(
        self, do_stream: DoStream, request: ModelRequest, model: Model
    ) -> AsyncIterator[StreamEvent]:
        instruments = self._instruments()
        if instruments is None:
            async for event in do_stream():
                yield event
            return
        # A stream's span is not made current: a context attached across ``yield`` would leak
        # into the consumer. It ends with the stream, or with the error that ended it.
        chat = instruments.start_chat(request, model, streaming=True)
        final: ModelResponse | None = None
        first: float | None = None
        try:
            async for event in do_stream():
                if first is None:
                    first = time.perf_counter()
                if isinstance(event, ResponseComplete):
                    final = event.response
                yield event
        except BaseException as exc:
            instruments.finish_chat(chat, error=exc, first_chunk_at=first)
            raise
        instruments.finish_chat(chat, final, first_chunk_at=first)
