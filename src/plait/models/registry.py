"""Model specs: the strings ``--model`` and ``Agent(model=...)`` accept.

==========================================  ===================================================
spec                                        model
==========================================  ===================================================
``openai:<model>``                          :class:`~plait.models.openai.OpenAIChatModel`
                                            (Chat Completions); needs ``OPENAI_API_KEY``
``openai-responses:<model>``                :class:`~plait.models.openai_responses.
                                            OpenAIResponsesModel` (the Responses API:
                                            reasoning items kept between calls); needs
                                            ``OPENAI_API_KEY``
``anthropic:<model>``                       :class:`~plait.models.anthropic.AnthropicModel`;
                                            needs ``ANTHROPIC_API_KEY``
``openai-compatible:<model>@<base_url>``    an OpenAI-compatible server (vLLM, Ollama, LiteLLM);
                                            key from ``OPENAI_COMPATIBLE_API_KEY``, else
                                            ``OPENAI_API_KEY``, else a placeholder (local
                                            servers usually need none)
==========================================  ===================================================

A :class:`~plait.models.Model` instance passes through unchanged. The provider SDKs are imported
only when a spec needs them. Models built from a spec get ``timeouts`` when given, else
:class:`~plait.models.timeouts.ModelTimeouts` defaults with ``total`` from
``$PLAIT_MODEL_TIMEOUT`` (seconds) when set, which is how the CLI is configured.
"""

from __future__ import annotations

import os
import re

from plait.errors import ConfigurationError
from plait.models.base import Model
from plait.models.timeouts import ModelTimeouts, parse_timeout

__all__ = ["MODEL_SPEC_FORMS", "MODEL_TIMEOUT_ENV", "resolve_model"]

MODEL_TIMEOUT_ENV = "PLAIT_MODEL_TIMEOUT"
"""Environment variable: the overall deadline (seconds) of each call of a model built from a
spec (``ModelTimeouts.total``)."""

MODEL_SPEC_FORMS = (
    "openai:<model>",
    "openai-responses:<model>",
    "anthropic:<model>",
    "openai-compatible:<model>@<base_url>",
)
"""The accepted spec forms, as shown in error messages."""

_COMPATIBLE = re.compile(r"(?P<model>.+?)@(?P<base_url>https?://\S+)")
_PLACEHOLDER_KEY = "not-needed"


def _forms() -> str:
    return ", ".join(MODEL_SPEC_FORMS)


def _required_key(env: str, spec: str) -> str:
    key = os.environ.get(env)
    if not key:
        raise ConfigurationError(
            f"Model {spec!r} needs an API key: set {env} (export {env}=...). "
            f"Or pick another model with --model, one of: {_forms()}."
        )
    return key


def _timeouts_from_env() -> ModelTimeouts:
    value = os.environ.get(MODEL_TIMEOUT_ENV)
    if not value:
        return ModelTimeouts()
    return ModelTimeouts(total=parse_timeout(value, f"${MODEL_TIMEOUT_ENV}"))


def resolve_model(spec: str | Model, *, timeouts: ModelTimeouts | None = None) -> Model:
    """The model a spec names (see the module table); a :class:`Model` is returned as-is.

    ``timeouts`` bound each call of the model (default: :class:`ModelTimeouts` with ``total``
    from ``$PLAIT_MODEL_TIMEOUT`` when set). Raises :class:`ConfigurationError` for a malformed
    spec (listing the accepted forms), for a missing API key (naming the variable to set), for
    a bad ``$PLAIT_MODEL_TIMEOUT``, or when the provider's SDK is not installed.
    """
    if not isinstance(spec, str):
        if isinstance(spec, Model):
            return spec
        missing = [m for m in ("name", "generate", "stream", "aclose") if not hasattr(spec, m)]
        if missing != ["name", "generate", "stream", "aclose"]:
            raise ConfigurationError(
                f"{type(spec).__name__} is not a complete Model: it lacks {', '.join(missing)}. "
                "Add them (``async def aclose(self) -> None: pass`` when it holds nothing)."
            )
        raise ConfigurationError(
            f"Expected a model spec string or a Model, got {type(spec).__name__}. "
            f"Spec forms: {_forms()}."
        )
    provider, _, name = spec.strip().partition(":")
    name = name.strip()
    timeouts = timeouts or _timeouts_from_env()
    if provider == "openai" and name:
        from plait.models.openai import OpenAIChatModel

        return OpenAIChatModel(
            name, api_key=_required_key("OPENAI_API_KEY", spec), timeouts=timeouts
        )
    if provider == "openai-responses" and name:
        from plait.models.openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel(
            name, api_key=_required_key("OPENAI_API_KEY", spec), timeouts=timeouts
        )
    if provider == "anthropic" and name:
        from plait.models.anthropic import AnthropicModel

        return AnthropicModel(
            name, api_key=_required_key("ANTHROPIC_API_KEY", spec), timeouts=timeouts
        )
    if provider == "openai-compatible" and (match := _COMPATIBLE.fullmatch(name)):
        from plait.models.openai import OpenAIChatModel

        api_key = (
            os.environ.get("OPENAI_COMPATIBLE_API_KEY")
            or os.environ.get("OPENAI_API_KEY")
            or _PLACEHOLDER_KEY
        )
        return OpenAIChatModel(
            match["model"],
            api_key=api_key,
            base_url=match["base_url"],
            provider_label="openai-compatible",
            timeouts=timeouts,
        )
    raise ConfigurationError(
        f"Unknown model spec {spec!r}. Use one of: {_forms()} "
        "(for example openai:gpt-4.1-mini, openai-responses:gpt-5-mini, "
        "anthropic:claude-sonnet-4-5, "
        "openai-compatible:llama3.1@http://localhost:11434/v1)."
    )
