"""``FallbackModel``: a list of models tried in order, the next one taking a call the previous
one failed with a provider outage.

::

    model = FallbackModel([AnthropicModel("claude-sonnet-4-5"), OpenAIChatModel("gpt-4.1")])

Which failures move a call on (``on=``, a predicate over the typed error; default
:func:`is_outage`):

=================================================  ============  ============================
failure                                            falls over    why
=================================================  ============  ============================
overloaded (529), server error (5xx)               yes           the provider is down
rate limited (429) after the adapter's retries     yes           this provider is saturated
timeout (:class:`~plait.errors.ModelTimeoutError`)  yes           no answer in time
connection failed, stream cut short before         yes           retryable, per the adapter
its first chunk
bad request (400), 401/403/404, 422                no            the next model would refuse it
                                                                 too, or the key is wrong
context overflow (:class:`ContextOverflowError`)   no            compaction handles it
whatever its status (a model of your own may                     (``OverflowRecoveryMiddleware``)
raise it with a 5xx) or ``retryable``
not a provider error (a bug, a configuration       no            raised untouched
error)
=================================================  ============  ============================

Every adapter retries on its own first (:mod:`plait.models.retrying`); a fallback happens only
once a model has given up. When every model failed, the last error is raised (its message names
the models tried).

**Streaming.** A stream that fails before its first event falls over like ``generate``; once an
event was relayed to the caller (text is on screen) a failure ends the call as it does without a
fallback: replaying the answer from another model would show two answers.

**Settings per provider.** A request's settings were written for the primary model. A fallback
whose provider (its ``reasoning_provider``: ``anthropic``, ``openai-responses``,
``openai-chat``) differs from the primary's gets the request without ``extra``
(provider-specific body fields) and
without the :class:`~plait.models.Reasoning` fields its family refuses (``budget_tokens`` for
OpenAI, which takes ``effort``; a ``temperature`` other than 1 for Anthropic with thinking on).
Reasoning parts of another provider are never replayed: every adapter drops them from what it
sends (see :mod:`plait.runtime.model_settings`); :class:`FallbackNotice` counts them.

**Who hears of a fallback.** :data:`fallback_listener` (a context variable, like
:data:`~plait.models.retrying.retry_listener`): the agent's turn sets one, so each fallback
becomes a :class:`~plait.runtime.events.ModelCallRerouted` event without any wiring.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace

from plait.errors import ConfigurationError, ContextOverflowError, ProviderError
from plait.messages import AssistantMessage, ReasoningPart
from plait.models.base import Model, ModelRequest, ModelResponse, StreamEvent
from plait.models.timeouts import ModelTimeouts

__all__ = ["FallbackModel", "FallbackNotice", "fallback_listener", "is_outage"]

FallbackOn = Callable[[ProviderError], bool]


def is_outage(error: ProviderError) -> bool:
    """The default ``on=``: the provider is down, saturated or slow (the table above), not a
    request the next model would refuse too."""
    if isinstance(error, ContextOverflowError):
        return False
    if error.status is not None:
        return error.status in (408, 409, 429) or error.status >= 500
    return error.retryable  # connection failed, timed out, stream cut short


@dataclass(frozen=True, slots=True)
class FallbackNotice:
    """A call moving from ``failed`` (a model name) to ``next`` after ``error``; ``dropped`` is
    how many reasoning parts of other providers the next model will not be sent."""

    failed: str
    next: str
    error: ProviderError
    dropped: int = 0


fallback_listener: ContextVar[Callable[[FallbackNotice], None] | None] = ContextVar(
    "plait_fallback_listener", default=None
)
"""Told of every fallback a :class:`FallbackModel` makes in this context. The agent's turn sets
it (each becomes a ``ModelCallRerouted`` event); it must not block; what it raises propagates."""


def _family(model: object) -> str | None:
    provider = getattr(model, "reasoning_provider", None)
    return provider if isinstance(provider, str) else None


def _foreign_reasoning(request: ModelRequest, provider: str | None) -> int:
    if provider is None:
        return 0
    return sum(
        1
        for message in request.messages
        if isinstance(message, AssistantMessage)
        for part in message.content
        if isinstance(part, ReasoningPart) and part.provider != provider
    )


def _settings_for(request: ModelRequest, primary: str | None, fallback: str | None) -> ModelRequest:
    """``request`` as a model of provider ``fallback`` accepts it, when it was written for a
    model of provider ``primary`` (the module's "Settings per provider")."""
    if primary == fallback or fallback is None:
        return request
    changes: dict[str, object] = {}
    if request.extra:
        changes["extra"] = {}
    reasoning = request.reasoning
    if reasoning is not None and fallback.startswith("openai") and reasoning.budget_tokens:
        changes["reasoning"] = replace(reasoning, budget_tokens=None)
    if (
        fallback == "anthropic"
        and reasoning is not None
        and reasoning.enabled
        and request.temperature not in (None, 1)
    ):
        changes["temperature"] = None
    return request.replace(**changes) if changes else request


class FallbackModel:
    """``models[0]``, then each of the others in turn when a call fails with an error ``on``
    accepts (default :func:`is_outage`). ``name`` is the primary's; ``reasoning_provider`` too.

    The models stay the caller's (``aclose`` closes none of them) unless ``owns=True``.
    """

    def __init__(
        self, models: Sequence[Model], *, on: FallbackOn = is_outage, owns: bool = False
    ) -> None:
        if len(models) < 2:
            raise ConfigurationError(
                "FallbackModel needs a primary model and at least one fallback: "
                "FallbackModel([primary, fallback, ...])."
            )
        self.models = list(models)
        self.on = on
        self._owns = owns

    @property
    def name(self) -> str:
        return self.models[0].name

    @property
    def reasoning_provider(self) -> str | None:
        return _family(self.models[0])

    @property
    def timeouts(self) -> ModelTimeouts | None:
        """The primary's deadline when every model keeps its own (the agent then times none of
        them); otherwise ``None``, so the agent's ``Limits.model_timeout`` bounds the whole call
        across every model tried."""
        found = [getattr(m, "timeouts", None) for m in self.models]
        if all(isinstance(t, ModelTimeouts) for t in found):
            return found[0]
        return None

    def _request(self, index: int, request: ModelRequest) -> ModelRequest:
        return _settings_for(request, _family(self.models[0]), _family(self.models[index]))

    def _fell_back(self, index: int, error: ProviderError, request: ModelRequest) -> None:
        if index + 1 >= len(self.models) or not self.on(error):
            raise error
        listener = fallback_listener.get()
        if listener is not None:
            nxt = self.models[index + 1]
            dropped = _foreign_reasoning(request, _family(nxt))
            listener(FallbackNotice(self.models[index].name, nxt.name, error, dropped))

    async def generate(self, request: ModelRequest) -> ModelResponse:
        for index, model in enumerate(self.models):
            try:
                return await model.generate(self._request(index, request))
            except ProviderError as error:
                self._fell_back(index, error, request)
        raise AssertionError("unreachable")  # the last model's error was raised

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for index, model in enumerate(self.models):
            started = False
            try:
                async for event in model.stream(self._request(index, request)):
                    started = True
                    yield event
                return
            except ProviderError as error:
                if started:
                    raise  # text was relayed already: no second answer (see the module)
                self._fell_back(index, error, request)

    async def aclose(self) -> None:
        if self._owns:
            for model in self.models:
                await model.aclose()
