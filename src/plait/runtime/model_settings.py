"""The model settings a turn puts in every request it builds, and the check for reasoning a
model cannot take.

A turn's settings are the agent's (``Agent(temperature=..., max_tokens=...)``, then
``Agent(model_settings=...)`` on top) with the run's ``model_settings=`` on top of those
(:meth:`~plait.models.base.ModelSettings.merged`), computed once per turn; each request the turn
builds copies their ``temperature``, ``max_tokens``, ``reasoning`` and ``extra``. The provider
adapter validates them (for example Anthropic's thinking budget) before it sends anything.

Reasoning parts are replayed only to the provider that made them. A model that declares
``reasoning_provider`` (the adapters do; a wrapped model forwards its inner model's) drops the
others from what it sends; :func:`dropped_reasoning` reports them, once per dispatch and foreign
provider, as :class:`~plait.runtime.events.ReasoningDropped`. A model without the attribute
(scripted and function models) is not checked, so the check costs nothing there; for the
adapters it is one pass over the assistant messages' parts, next to an HTTP call.
"""

from __future__ import annotations

from plait.messages import AssistantMessage, ReasoningPart
from plait.models.base import ModelRequest, ModelSettings
from plait.runtime.events import ReasoningDropped

__all__ = ["dropped_reasoning", "turn_settings"]


def turn_settings(
    temperature: float | None,
    max_tokens: int | None,
    agent: ModelSettings | None,
    run: ModelSettings | None,
) -> ModelSettings:
    """The agent's ``temperature``/``max_tokens`` arguments, then its ``model_settings``, then
    the run's, each set field winning over the ones before."""
    base = ModelSettings(temperature=temperature, max_tokens=max_tokens)
    return base.merged(agent).merged(run)


def dropped_reasoning(
    request: ModelRequest, provider: str, dispatch: int
) -> list[ReasoningDropped]:
    """One event per provider whose reasoning parts ``request`` carries but a model whose
    ``reasoning_provider`` is ``provider`` drops; usually none."""
    counts: dict[str, int] = {}
    for message in request.messages:
        if isinstance(message, AssistantMessage):
            for part in message.content:
                if isinstance(part, ReasoningPart) and part.provider != provider:
                    counts[part.provider] = counts.get(part.provider, 0) + 1
    if not counts:
        return []
    return [
        ReasoningDropped(dispatch=dispatch, provider=name, count=count)
        for name, count in counts.items()
    ]
