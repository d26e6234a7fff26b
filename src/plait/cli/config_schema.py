"""What a config file may hold: the pydantic models ``plait.toml``, ``[tool.plait]`` and
``config.toml`` are validated with (:class:`ConfigFile` and its tables), every key optional.

Unknown keys are refused (``extra="forbid"``) and :func:`known_keys` says which a table takes, so
a typo is an error naming the keys allowed there. The models are frozen. Reading, merging and
precedence are :mod:`plait.cli.config`'s; import these names from there.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationInfo, model_validator

from plait.errors import ConfigurationError
from plait.models.timeouts import parse_timeout

__all__ = [
    "ConfigFile",
    "LimitsConfig",
    "McpServerConfig",
    "PriceConfig",
    "ProviderConfig",
    "ProviderName",
    "SubagentConfig",
    "Timeout",
    "WorkspaceConfig",
    "known_keys",
]

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


def _timeout(value: Any, info: ValidationInfo) -> float:
    try:
        return parse_timeout(value, info.field_name or "timeout")
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None


Timeout = Annotated[float, PlainValidator(_timeout)]
"""Seconds > 0, ``inf`` for no deadline: the rule of :func:`~plait.models.timeouts.parse_timeout`
(``--timeout`` and ``$PLAIT_MODEL_TIMEOUT`` follow it too)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LimitsConfig(_Strict):
    """``[limits]``: bounds of a turn."""

    model_calls_per_turn: PositiveInt | None = None
    """Model calls one turn may make (the library's default when unset)."""
    tool_timeout: Timeout | None = None
    """Seconds one tool call may run (the library's default when unset; ``inf``: no limit)."""
    max_input_tokens: PositiveInt | None = None
    """History beyond this many tokens is summarized (CLI default 100,000)."""


class McpServerConfig(_Strict):
    """``[mcp.<name>]``: one MCP server, started by ``command`` (stdio) or reached at ``url``
    (Streamable HTTP); exactly one of the two. The keys are those of ``plait.mcp.McpServer``
    (``plait.mcp.servers_from_mapping`` takes :meth:`settings`)."""

    command: str | list[str] | None = None
    url: str | None = None
    env: dict[str, str] | None = None
    cwd: str | None = None
    headers: dict[str, str] | None = None
    prefix: str | None = None
    allow: list[str] | None = None
    block: list[str] | None = None
    timeout: PositiveFloat | None = None
    init_timeout: PositiveFloat | None = None
    max_tools: PositiveInt | None = None
    max_result_chars: PositiveInt | None = None
    max_description_chars: PositiveInt | None = None
    max_schema_chars: PositiveInt | None = None
    max_message_bytes: PositiveInt | None = None
    defer: bool | None = None
    """``true``: the server's tools stay out of requests until the model finds them with
    ``search_tools``."""
    log_file: str | None = None
    """Where a stdio server's stderr goes (default: ``mcp-logs/<name>.log`` in the data
    folder)."""

    def settings(self) -> dict[str, Any]:
        """The keys that were set, as a plain mapping."""
        return self.model_dump(exclude_none=True)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (stdio) or 'url' (HTTP)")
        return self


class WorkspaceConfig(_Strict):
    """``[workspace]``: the file and shell tools of ``plait run`` / ``plait chat``
    (:mod:`plait.workspace`)."""

    enabled: bool | None = None
    """``false``: no workspace tools (as ``--no-workspace``)."""
    allow: list[Literal["write", "shell"]] | None = None
    """Gated actions allowed without asking: ``"write"`` (write_file, edit_file), ``"shell"``."""
    network: bool | None = None
    """``true``: ``shell`` commands may use the network (default: none)."""


ProviderName = Literal["openai", "openai-responses", "anthropic", "openai-compatible"]
"""The providers a ``[providers.<name>]`` table may configure (a model spec's first part)."""


class ProviderConfig(_Strict):
    """``[providers.<name>]``: where a provider's models are reached and with which key, for
    ``-m <name>:<model>`` and ``plait models``. ``api_key_env`` names the variable holding the
    key (default: ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``); ``api_key`` holds the key itself
    (a warning says to prefer ``api_key_env``: a file is easily committed). Both given: the
    variable, when it is set."""

    base_url: Annotated[str, Field(pattern=r"^https?://\S+$")] | None = None
    """The API's base URL (e.g. ``https://gateway.example/v1``; the SDK's default when unset)."""
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    api_key: Annotated[str, Field(min_length=1)] | None = None


class PriceConfig(_Strict):
    """``[prices.<model>]``: US dollars per million tokens (see :mod:`plait.pricing`)."""

    input: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    output: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    cache_read: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    cache_write: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


class SubagentConfig(_Strict):
    """``[subagents.<name>]``: a subagent the agent's ``task`` tool can hand work to
    (:mod:`plait.cli.subagents`)."""

    description: str | None = None
    model: str | None = None
    system: str | None = None
    skills: list[str] | None = None


class ConfigFile(_Strict):
    """What one config file may hold (every key optional)."""

    model: str | None = None
    """A model spec (``plait run --help`` lists the forms)."""
    mode: Literal["disclosure", "managed"] | None = None
    skills: list[str] | None = None
    """Skills folders, in precedence order, added before the standard ones."""
    default_skills: bool | None = None
    """``false``: skip the standard skill folders (as ``--no-default-skills``)."""
    store: str | None = None
    """A SQLite file or ``postgresql://`` URL for threads."""
    timeout: Timeout | None = None
    """Seconds one model call may take, retries included (``inf``: no deadline)."""
    sandbox: Literal["bwrap", "none"] | None = None
    allow_scripts: bool | None = None
    system_prompt: str | None = None
    plain: bool | None = None
    """``true``: never render answers as Markdown."""
    limits: LimitsConfig | None = None
    workspace: WorkspaceConfig | None = None
    mcp: dict[str, McpServerConfig] | None = None
    mcp_json: bool | None = None
    """``false``: do not read the current folder's ``.mcp.json`` (like ``[mcp.*]`` tables, its
    servers are commands that run: read it first in a repository you do not trust)."""
    prices: dict[str, PriceConfig] | None = None
    fallback: list[str] | None = None
    """Models to try in order when the model is down or rate limited (as ``--fallback``)."""
    subagents: dict[str, SubagentConfig] | None = None
    providers: dict[ProviderName, ProviderConfig] | None = None


def known_keys(parent: tuple[int | str, ...]) -> list[str]:
    """The keys allowed in the table at ``parent`` (``()``: the top level; ``("limits",)``;
    ``("mcp", "files")``)."""
    model: type[BaseModel] = ConfigFile
    sections: dict[str, type[BaseModel]] = {
        "limits": LimitsConfig,
        "workspace": WorkspaceConfig,
        "mcp": McpServerConfig,
        "prices": PriceConfig,
        "subagents": SubagentConfig,
        "providers": ProviderConfig,
    }
    if parent and str(parent[0]) in sections:
        model = sections[str(parent[0])]
    return list(model.model_fields)
