"""OpenAI prompt caching: what the OpenAI adapters add to a request so its prefix is cached.

OpenAI caches every prompt of 1,024 tokens or more by itself (cache hits in 128-token steps,
reported as ``cached_tokens``); a request can only help it route to the machine that holds its
prefix, with ``prompt_cache_key``, and ask for a longer retention, with
``prompt_cache_retention``. :class:`OpenAIPromptCache` (on by default in
:class:`~plait.models.openai.OpenAIChatModel` and
:class:`~plait.models.openai_responses.OpenAIResponsesModel`):

==========================  ================================================================
field                       sent as
==========================  ================================================================
``key``                     ``prompt_cache_key``; ``None`` (default) uses the request's thread
                            id (:mod:`.prompt_cache`), so each thread routes on its own; a
                            request without a thread sends none
``retention``               ``prompt_cache_retention`` (``"in_memory"`` or ``"24h"``); ``None``
                            sends none (the account's default)
``send``                    ``None`` (default): only to OpenAI itself, a client whose base URL
                            is ``https://api.openai.com``; an OpenAI-compatible server (vLLM,
                            Ollama, LiteLLM, Azure) is sent neither field, since some refuse
                            fields they do not know. ``True``: always; ``False``: never
==========================  ================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from plait.errors import ConfigurationError
from plait.models.base import ModelRequest
from plait.models.prompt_cache import THREAD_KEY

__all__ = ["OPENAI_HOST", "OpenAIPromptCache", "cache_fields", "is_openai_host"]

OPENAI_HOST = "api.openai.com"


@dataclass(frozen=True, slots=True)
class OpenAIPromptCache:
    """The cache fields an OpenAI adapter sends (the module table)."""

    key: str | None = None
    retention: Literal["in_memory", "24h"] | None = None
    send: bool | None = None

    def __post_init__(self) -> None:
        if self.retention not in (None, "in_memory", "24h"):
            raise ConfigurationError(
                "OpenAIPromptCache.retention must be 'in_memory', '24h' or None, got "
                f"{self.retention!r}."
            )
        if self.key is not None and (not isinstance(self.key, str) or not self.key):
            raise ConfigurationError(
                f"OpenAIPromptCache.key must be a non-empty string or None, got {self.key!r}."
            )


def is_openai_host(base_url: object) -> bool:
    """Whether ``base_url`` (a string or an ``httpx.URL``) is OpenAI's own API."""
    text = str(base_url or "")
    host = text.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    return host == OPENAI_HOST


def cache_fields(
    request: ModelRequest, cache: OpenAIPromptCache | None, base_url: object
) -> dict[str, Any]:
    """The body fields ``cache`` adds to ``request`` for a client at ``base_url``."""
    if cache is None or cache.send is False:
        return {}
    if cache.send is None and not is_openai_host(base_url):
        return {}
    fields: dict[str, Any] = {}
    key = cache.key if cache.key is not None else request.metadata.get(THREAD_KEY)
    if isinstance(key, str) and key:
        fields["prompt_cache_key"] = key[:64]  # the API's bound on the key's length
    if cache.retention is not None:
        fields["prompt_cache_retention"] = cache.retention
    return fields
