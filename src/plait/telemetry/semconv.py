"""The OpenTelemetry GenAI semantic conventions plait follows: names, buckets, switches.

Version: the GenAI conventions as of semantic-conventions **v1.41.1** (the last release in the
main repository, "Development" status; they now move to ``semantic-conventions-genai``), i.e.
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` behaviour: ``gen_ai.provider.name``
(not ``gen_ai.system``), content as ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
``gen_ai.system_instructions`` span attributes, ``invoke_agent`` as an INTERNAL span without
``gen_ai.usage.*``. From the conventions' newer home (``semantic-conventions-genai``, main, not yet
in a release of the main repository): ``gen_ai.request.stream``,
``gen_ai.response.time_to_first_chunk`` and the ``gen_ai.client.operation.time_to_first_chunk``
histogram.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from plait.errors import ConfigurationError
from plait.messages import Usage

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "DURATION_BUCKETS",
    "SEMCONV_VERSION",
    "TOKEN_BUCKETS",
    "capture_content_from_env",
    "provider_name",
    "usage_attributes",
]

SEMCONV_VERSION = "1.41.1"
"""The semantic-conventions release whose GenAI spans, attributes and metrics plait emits."""

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
"""``gen_ai.client.token.usage`` bucket boundaries, as the spec gives them."""

DURATION_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""``gen_ai.client.operation.duration`` bucket boundaries (seconds), as the spec gives them."""

_ON = {"true", "1", "yes", "span_only", "span_and_event"}
_OFF = {"", "false", "0", "no", "no_content", "event_only"}


def capture_content_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` turns content capture on.

    Unset means off. ``true``/``SPAN_ONLY``/``SPAN_AND_EVENT`` (any case) turn it on;
    ``false``/``NO_CONTENT``/``EVENT_ONLY`` leave it off (plait records content on spans only, it
    emits no content events). Anything else raises :class:`ConfigurationError` naming the values.
    """
    value = (environ if environ is not None else os.environ).get(CAPTURE_CONTENT_ENV, "")
    key = value.strip().lower()
    if key in _ON:
        return True
    if key in _OFF:
        return False
    raise ConfigurationError(
        f"{CAPTURE_CONTENT_ENV}={value[:40]!r} is not understood; use true or SPAN_ONLY to "
        "record message content on spans, false or NO_CONTENT to keep it off."
    )


def provider_name(model: Any) -> str:
    """``gen_ai.provider.name`` for ``model``: its ``provider_label`` (the OpenAI adapter:
    ``"openai"``, ``"openai-compatible"``) or ``provider`` attribute, else a name derived from
    the adapter class (``AnthropicModel`` → ``"anthropic"``; plait's scripted models →
    ``"plait"``). Wrapped models (``wrap_model``) are looked through."""
    while hasattr(model, "inner"):
        model = model.inner
    for attribute in ("provider_label", "provider"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    cls = type(model).__name__
    if cls.startswith("Anthropic"):
        return "anthropic"
    if cls.startswith("OpenAI"):
        return "openai"
    if cls in ("ScriptedModel", "FunctionModel"):
        return "plait"
    return cls.removesuffix("Model").lower() or "unknown"


@functools.cache
def _usage_keys(prefix: str) -> tuple[str, str, str, str, str]:
    return (
        f"{prefix}input_tokens",
        f"{prefix}output_tokens",
        f"{prefix}cache_read.input_tokens",
        f"{prefix}cache_creation.input_tokens",
        f"{prefix}reasoning.output_tokens",
    )


def usage_attributes(usage: Usage, prefix: str = "gen_ai.usage.") -> dict[str, int]:
    """The span attributes for one call's ``usage``: input and output tokens always; cache read,
    cache creation and reasoning (``reasoning.output_tokens``, part of the output tokens) only
    when the provider reported them (non-zero)."""
    input_key, output_key, read_key, write_key, reasoning_key = _usage_keys(prefix)
    attributes = {input_key: usage.input_tokens, output_key: usage.output_tokens}
    if usage.cache_read_tokens:
        attributes[read_key] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes[write_key] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        attributes[reasoning_key] = usage.reasoning_tokens
    return attributes
