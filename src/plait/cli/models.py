"""``plait models``: the models the configured provider lists.

The provider is the one ``run`` would use: ``--model``, else the config files' ``model``, else
``$PLAIT_MODEL``, else whichever of ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` is set
(:func:`plait.cli.options.model_spec`). The model is built as ``run`` builds it, and its SDK
client asks the provider: OpenAI and OpenAI-compatible servers ``GET {base_url}/models``
(``client.models.list()``), Anthropic ``GET /v1/models``. Only the provider matters, so the
spec may leave the model out: ``--model anthropic``, ``--model openai-compatible:URL``.

Standard output holds the ids, one a line (OpenAI's sorted by name, Anthropic's newest first, as
the API sends them); one line on standard error says how many and where from. ``--json`` writes
the provider's records instead. At most :data:`MAX_MODELS` are listed, within
:data:`DEFAULT_MODELS_TIMEOUT` seconds (``--timeout``). A server that cannot be reached is named
by the URL tried; a missing SDK is one line with the ``pip install`` command.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from plait.cli.console import fail
from plait.cli.options import Flags, ModelOption, agent_options, merged_settings
from plait.errors import ConfigurationError, clipped
from plait.models.timeouts import parse_timeout

__all__ = ["DEFAULT_MODELS_TIMEOUT", "MAX_MODELS", "models"]

DEFAULT_MODELS_TIMEOUT = 30.0
"""Seconds ``plait models`` waits for the provider's whole list (``--timeout`` changes it)."""

MAX_MODELS = 5000
"""The most models listed (a server that pages without end is cut off here, and says so)."""

_PROVIDERS = ("openai", "openai-responses", "anthropic")
_PLACEHOLDER = "models"  # the model name a spec given without one gets (never sent anywhere)


def _deadline(value: float | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_timeout(value, "--timeout")
    except ConfigurationError as exc:
        raise typer.BadParameter(str(exc)) from None


ListTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        callback=_deadline,
        help=f"Seconds to wait for the whole list (default: {DEFAULT_MODELS_TIMEOUT:g}; inf: no "
        "deadline).",
    ),
]


def listing_spec(spec: str) -> str:
    """``spec`` with a placeholder model name where it gives none (``anthropic``,
    ``openai:``, ``openai-compatible:http://host/v1``), so only the provider need be named."""
    provider, colon, rest = spec.strip().partition(":")
    if provider in _PROVIDERS and not rest.strip():
        return f"{provider}:{_PLACEHOLDER}"
    if provider == "openai-compatible" and colon:
        if rest.startswith(("http://", "https://")):
            return f"openai-compatible:{_PLACEHOLDER}@{rest}"
        if rest.startswith("@"):
            return f"openai-compatible:{_PLACEHOLDER}{rest}"
    return spec


def models(
    model: ModelOption = None,
    timeout: ListTimeoutOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="The provider's records as a JSON array.")
    ] = False,
) -> None:
    """List the models the configured provider offers.

    The provider is the one of --model, else of the config or the environment (as plait run
    picks it); the spec may leave out the model: --model anthropic, --model
    openai-compatible:http://localhost:11434/v1."""
    try:
        settings = merged_settings(Flags(model=model, timeout=timeout))
        configured = settings.get("model")
        if isinstance(configured, str):
            settings.set("model", listing_spec(configured), settings.origins.get("model", ""))
        chosen: Any = agent_options(settings).options.model
    except ConfigurationError as exc:
        fail(str(exc), 2)
    kind, client, path = _client(chosen)
    url = str(client.base_url).rstrip("/") + path
    deadline = DEFAULT_MODELS_TIMEOUT if timeout is None else timeout
    try:
        records = asyncio.run(_listed(kind, client, deadline))
    except Exception as exc:  # the SDK's errors, told apart by name: either SDK may be absent
        if isinstance(exc, TimeoutError) or type(exc).__name__ == "APITimeoutError":
            fail(
                f"{url} sent no complete list of models within {deadline:g} s. Check that the "
                "server is up, or allow more time with --timeout SECONDS.",
                1,
            )
        fail(_failure(exc, url, chosen), 1)
    _show(records, kind, url, as_json)


def _client(model: Any) -> tuple[str, Any, str]:
    """The provider kind, the model's own SDK client (configured as ``run`` configures it: key,
    base URL, timeouts) and the path of the models list under its base URL."""
    from plait.models.anthropic import AnthropicModel
    from plait.models.openai import OpenAIChatModel
    from plait.models.openai_responses import OpenAIResponsesModel

    if isinstance(model, AnthropicModel):
        return "anthropic", model._client, "/v1/models"
    if isinstance(model, OpenAIChatModel | OpenAIResponsesModel):
        return "openai", model._client, "/models"
    fail(f"{getattr(model, 'name', 'This model')} has no provider to list models from.", 2)


async def _listed(kind: str, client: Any, deadline: float) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(deadline):
            async for record in client.models.list():
                records.append(record.model_dump(mode="json"))
                if len(records) > MAX_MODELS:
                    break
    finally:
        await client.close()
    if kind == "openai":
        records.sort(key=lambda r: str(r.get("id")))
    return records


def _failure(exc: Exception, url: str, model: Any) -> str:
    """What went wrong, naming the URL tried (and the key's variable when it was refused)."""
    status = getattr(exc, "status_code", None)
    detail = clipped(" ".join(str(getattr(exc, "message", None) or exc).split()), 300)
    if status is None:
        if type(exc).__name__ == "APIConnectionError":
            cause = exc.__cause__ or exc.__context__
            reason = f" ({clipped(str(cause), 300)})" if cause and str(cause) else ""
            return (
                f"Could not reach {url}{reason}. Check that the server is running and that "
                "the base URL is right (--model openai-compatible:<model>@<base_url>)."
            )
        return f"Listing models at {url} failed: {type(exc).__name__}: {detail}"
    if status in (401, 403):
        key = getattr(model, "api_key_env", "the API key variable")
        return f"{url} refused the credentials ({status}: {detail}). Set {key} to a valid key."
    if status == 404:
        return f"{url} answered 404: this server does not list its models ({detail})."
    return f"{url} answered {status}: {detail}"


def _show(records: list[dict[str, Any]], kind: str, url: str, as_json: bool) -> None:
    cut = len(records) > MAX_MODELS
    records = records[:MAX_MODELS]
    if as_json:
        typer.echo(json.dumps(records, ensure_ascii=False))
    else:
        for record in records:
            typer.echo(str(record.get("id")))
    note = f"{len(records)} model{'s' if len(records) != 1 else ''} at {url}"
    if cut:
        note += f" (the first {MAX_MODELS}; the server lists more)"
    Console(stderr=True, highlight=False, emoji=False).print(
        Text(note, style="dim"), soft_wrap=True
    )
