"""The model a spec names, built with its provider's ``[providers.<name>]`` settings.

::

    [providers.openai]
    base_url = "https://gateway.example/v1"
    api_key_env = "GATEWAY_KEY"

    [providers.openai-compatible]          # then: -m openai-compatible:llama3.1
    base_url = "http://localhost:11434/v1"

A provider with no table is built by :func:`plait.models.registry.resolve_model` alone. With
one, ``base_url`` replaces the SDK's default (for ``openai-compatible``, a spec with no
``@URL`` takes it; one with ``@URL`` keeps its own), and the key comes from ``$api_key_env`` (if
set), else ``api_key``, else the provider's usual variable. A missing key names the variable and
the file that chose it; a failed connection names the base URL (the provider errors do).
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError

if TYPE_CHECKING:
    from plait.cli.config import Settings
    from plait.models.base import Model

__all__ = ["provider_model"]

_DEFAULT_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openai-compatible": "OPENAI_COMPATIBLE_API_KEY",
}


def provider_model(spec: str, settings: Settings, timeout: float | None) -> Model:
    """The model for ``spec`` (see the module docstring); ``timeout`` bounds each call (``None``:
    the registry's default, ``$PLAIT_MODEL_TIMEOUT`` included). Raises
    :class:`~plait.errors.ConfigurationError` (a bad spec, a missing key, a missing SDK)."""
    from plait.models.registry import resolve_model
    from plait.models.timeouts import ModelTimeouts

    timeouts = None if timeout is None else ModelTimeouts(total=timeout)
    provider, _, name = spec.strip().partition(":")
    name = name.strip()
    table = settings.section(f"providers.{provider}")
    if not table or not name:
        return resolve_model(spec, timeouts=timeouts)
    base_url: str | None = table.get("base_url")
    origin = settings.origins.get(f"providers.{provider}.{next(iter(table))}", "plait.toml")
    key_env = table.get("api_key_env") or _DEFAULT_KEY_ENV[provider]
    key = os.environ.get(key_env) or table.get("api_key")
    if provider == "openai-compatible":
        model_name, at, url = name.partition("@")
        if at:
            base_url = url
        elif base_url is None:
            return resolve_model(spec, timeouts=timeouts)  # names the @URL form
        name = model_name
        key = key or os.environ.get("OPENAI_API_KEY") or "not-needed"
    if not key:
        chosen = "" if "api_key_env" not in table else f" ({origin} names it)"
        raise ConfigurationError(
            f"Model {spec!r} needs an API key: set {key_env}{chosen} (export {key_env}=...), "
            f"or api_key_env under [providers.{provider}] in plait.toml."
        )
    model = _build(provider, name, key, base_url, timeouts or ModelTimeouts())
    if "api_key_env" in table:  # an error about the key names the variable that holds it
        setattr(model, "api_key_env", key_env)  # noqa: B010
        errors = getattr(model, "_errors", None)
        if dataclasses.is_dataclass(errors) and not isinstance(errors, type):
            setattr(model, "_errors", dataclasses.replace(errors, api_key_env=key_env))  # noqa: B010
    return model


def _build(provider: str, name: str, key: str, base_url: str | None, timeouts: Any) -> Model:
    try:
        if provider == "anthropic":
            from plait.models.anthropic import AnthropicModel

            return AnthropicModel(name, api_key=key, base_url=base_url, timeouts=timeouts)
        if provider == "openai-responses":
            from plait.models.openai_responses import OpenAIResponsesModel

            return OpenAIResponsesModel(name, api_key=key, base_url=base_url, timeouts=timeouts)
        from plait.models.openai import OpenAIChatModel
    except ImportError as exc:
        package = "anthropic" if provider == "anthropic" else "openai"
        raise ConfigurationError(
            f"Model provider {provider!r} needs its SDK ({exc.name or package}): "
            f"pip install 'plait[{package}]'."
        ) from None
    label = "openai-compatible" if provider == "openai-compatible" else "openai"
    return OpenAIChatModel(
        name, api_key=key, base_url=base_url, timeouts=timeouts, provider_label=label
    )
