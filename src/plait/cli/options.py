"""From the flags of ``plait run`` / ``plait chat`` and the config files to the agent's options.

:func:`merged_settings` lays the flags over :func:`~plait.cli.config.load_settings` (flags win,
key by key) and remembers each value's origin; :func:`agent_options` turns the result into
:class:`~plait.cli.agents.AgentOptions` plus what the terminal needs (the model's spec and
price). ``plait config show`` prints the same merged settings.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from plait.cli.agents import (
    DEFAULT_SYSTEM_PROMPT,
    AgentOptions,
    Mode,
    NoProviderConfigured,
    SandboxChoice,
)
from plait.cli.config import Settings, load_settings
from plait.cli.console import report_note
from plait.cli.db import STORE_HELP
from plait.cli.skill_folders import SkillFolder, skill_folders
from plait.cli.subagents import FallbackOption, subagents_middleware, with_fallbacks
from plait.errors import ConfigurationError
from plait.models.timeouts import parse_timeout
from plait.pricing import PRICES, Price, price_for

if TYPE_CHECKING:
    from plait.models.base import Model, ModelSettings, Reasoning
    from plait.models.retrying import RetryNotice
    from plait.runtime.agent import Limits

__all__ = ["Flags", "Resolved", "agent_options", "merged_settings", "model_spec", "with_flags"]


@dataclass(slots=True)
class Flags:
    """The command-line flags that have a config-file counterpart; ``None`` = not given."""

    model: str | None = None
    skills: list[Path] = field(default_factory=list)
    no_default_skills: bool = False
    mode: Mode | None = None
    store: str | None = None
    allow_scripts: bool | None = None
    sandbox: SandboxChoice | None = None
    max_input_tokens: int | None = None
    system_prompt: str | None = None
    timeout: float | None = None
    plain: bool | None = None
    yes: bool = False
    no_workspace: bool = False
    temperature: float | None = None
    max_tokens: int | None = None
    thinking: str | None = None
    fallback: list[str] = field(default_factory=list)
    quiet: bool = False

    def apply(self, settings: Settings) -> None:
        """Lay these flags over ``settings`` (a flag given wins over every other source)."""
        settings.set("model", self.model, "--model")
        settings.set("mode", self.mode.value if self.mode else None, "--mode")
        settings.set("store", self.store, "--store")
        scripts_flag = "--allow-scripts" if self.allow_scripts else "--no-allow-scripts"
        settings.set("allow_scripts", self.allow_scripts, scripts_flag)
        settings.set("sandbox", self.sandbox.value if self.sandbox else None, "--sandbox")
        settings.set("limits.max_input_tokens", self.max_input_tokens, "--max-input-tokens")
        settings.set("system_prompt", self.system_prompt, "--system-prompt")
        settings.set("timeout", self.timeout, "--timeout")
        settings.set("plain", self.plain, "--plain" if self.plain else "--markdown")
        settings.set(
            "default_skills", False if self.no_default_skills else None, "--no-default-skills"
        )
        settings.set("workspace.enabled", False if self.no_workspace else None, "--no-workspace")
        if self.yes:
            settings.set("workspace.allow", ["write", "shell"], "--yes")
        settings.set("temperature", self.temperature, "--temperature")
        settings.set("max_tokens", self.max_tokens, "--max-tokens")
        settings.set("thinking", self.thinking, "--thinking")
        settings.set("fallback", self.fallback or None, "--fallback")
        if self.skills:
            configured = settings.get("skills", [])
            origin = settings.origins.get("skills")
            settings.values["skills"] = [*map(str, self.skills), *configured]
            settings.origins["skills"] = "--skills" + (f", {origin}" if origin else "")


SkillsOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--skills",
        help="A skills folder, a skill's folder or its SKILL.md (repeatable), before the "
        "configured and standard ones; earlier folders win name clashes.",
    ),
]
NoDefaultSkillsOption = Annotated[
    bool,
    typer.Option(
        "--no-default-skills",
        help="Skip the standard folders (./.agents/skills, ./.claude/skills, ~/.agents/skills, "
        "~/.claude/skills, $PLAIT_HOME/skills).",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="The model: a spec, in one of the forms listed below. Default: model in plait.toml, "
        "$PLAIT_MODEL, else whichever of OPENAI_API_KEY / ANTHROPIC_API_KEY is set.",
    ),
]
ModeOption = Annotated[
    Mode | None,
    typer.Option(
        "--mode", help="disclosure: catalog + read_file; managed: load_skill. Default: disclosure."
    ),
]
StoreOption = Annotated[str | None, typer.Option("--store", help=STORE_HELP)]
ScriptsOption = Annotated[
    bool | None,
    typer.Option(
        "--allow-scripts/--no-allow-scripts",
        help="Managed mode: let skills' scripts/ run as tools. Default: no.",
    ),
]
SandboxOption = Annotated[
    SandboxChoice | None,
    typer.Option(
        "--sandbox",
        help="What runs skill scripts (with --allow-scripts): bwrap = bubblewrap, no network, "
        "writes only in the skill's workspace (fails if bwrap does not work here); none = "
        "unsandboxed, as your user. Default: bwrap.",
    ),
]
TokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-input-tokens", min=1, help="Summarize history beyond this budget. Default: 100000."
    ),
]
SystemOption = Annotated[
    str | None,
    typer.Option(
        "--system-prompt",
        "--system",
        "-s",
        help="The agent's system prompt (default: a generic one).",
    ),
]
YesOption = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Let the workspace tools write files and run shell commands without asking "
        '(as allow = \\["write", "shell"] under \\[workspace]). Without it, chat asks at the '
        "terminal and a run with no terminal refuses them.",
    ),
]
NoWorkspaceOption = Annotated[
    bool,
    typer.Option(
        "--no-workspace",
        help="No file and shell tools (ls, read_file, write_file, edit_file, glob, grep, shell "
        "on the current folder).",
    ),
]
TemperatureOption = Annotated[
    float | None,
    typer.Option("--temperature", min=0.0, help="Sampling temperature (default: the model's)."),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option("--max-tokens", min=1, help="Most tokens one answer may have."),
]
ThinkingOption = Annotated[
    str | None,
    typer.Option(
        "--thinking",
        "--reasoning",
        help="How much the model thinks: a token budget (Anthropic, e.g. 4096), low, medium, "
        "high, or off. Default: the model's.",
    ),
]

# What decides held tool calls without asking (plait run, plait threads resume).
ApproveAllOption = Annotated[
    bool, typer.Option("--approve-all", help="Approve every held tool call without asking.")
]
ApproveOption = Annotated[
    list[str] | None,
    typer.Option(
        "--approve",
        metavar="TOOL",
        help="Approve held calls of this tool without asking (repeatable; patterns: mcp_*).",
    ),
]
DenyAllOption = Annotated[
    bool, typer.Option("--deny-all", help="Reject every held tool call without asking.")
]
RequireApprovalOption = Annotated[
    list[str] | None,
    typer.Option(
        "--require-approval",
        metavar="PATTERN",
        help="Hold calls of the tools this name pattern matches for a decision (repeatable; "
        "fnmatch: mcp_*, run_* for skill scripts). With no flag deciding, you are asked; "
        "with nobody to ask, they are rejected.",
    ),
]


QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Show each skill warning once: one already shown (in any earlier run) is left "
        "out. Remembered in skill-warnings-shown.json in the data folder.",
    ),
]


def _timeout_flag(value: float | None) -> float | None:
    """``--timeout`` by the rule of every timeout setting (:func:`parse_timeout`)."""
    if value is None:
        return None
    try:
        return parse_timeout(value, "--timeout")
    except ConfigurationError as exc:
        raise typer.BadParameter(str(exc)) from None


TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        callback=_timeout_flag,
        help="Seconds one model call may take, retries included (default: 600; inf: no deadline).",
    ),
]
PlainOption = Annotated[
    bool | None,
    typer.Option(
        "--plain/--markdown",
        help="Answers as plain text, or rendered as Markdown. Default: Markdown on a terminal, "
        "plain when piped.",
    ),
]


def _flag_options(
    skills: SkillsOption = None,
    no_default_skills: NoDefaultSkillsOption = False,
    model: ModelOption = None,
    mode: ModeOption = None,
    store: StoreOption = None,
    allow_scripts: ScriptsOption = None,
    sandbox: SandboxOption = None,
    max_input_tokens: TokensOption = None,
    system_prompt: SystemOption = None,
    timeout: TimeoutOption = None,
    plain: PlainOption = None,
    yes: YesOption = False,
    no_workspace: NoWorkspaceOption = False,
    temperature: TemperatureOption = None,
    max_tokens: MaxTokensOption = None,
    thinking: ThinkingOption = None,
    fallback: FallbackOption = None,
    quiet: QuietOption = False,
) -> None:
    """The :class:`Flags` fields as typer options, in their order in a command's help (this
    signature is what :func:`with_flags` splices in; the function never runs)."""


def with_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` as typer sees it: its ``flags: Flags`` parameter spelled out as the options
    of :func:`_flag_options`, at that parameter's place in the help. Typer's values for them
    reach ``command`` as one :class:`Flags` (no ``--skills`` is an empty list); the other
    parameters pass through. ``plait run``, ``plait chat`` and ``plait config show`` share the
    flags this way, so each is declared, and gathered into :class:`Flags`, once."""
    signature = inspect.signature(command, eval_str=True)
    options = list(inspect.signature(_flag_options, eval_str=True).parameters.values())
    names = [option.name for option in options]
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        parameters.extend(options if parameter.name == "flags" else [parameter])

    @functools.wraps(command)
    def typer_command(**values: Any) -> None:
        given = {name: values.pop(name) for name in names}
        given["fallback"] = given["fallback"] or []
        command(**values, flags=Flags(**{**given, "skills": given["skills"] or []}))

    # typer reads the signature and the annotations (typing.get_type_hints) of what it calls
    typer_command.__dict__["__signature__"] = signature.replace(parameters=parameters)
    typer_command.__annotations__ = {p.name: p.annotation for p in parameters}
    return typer_command


def merged_settings(flags: Flags, cwd: Path | None = None) -> Settings:
    """Config files and environment (:func:`~plait.cli.config.load_settings`), then ``flags``.

    Raises :class:`~plait.cli.config.ConfigFileError` for a bad config file.
    """
    settings = load_settings(cwd)
    for note in settings.notes:
        report_note(note)
    flags.apply(settings)
    return settings


def model_spec(settings: Settings) -> str:
    """The model spec to use: the merged ``model`` setting, else a default for whichever of
    ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` is set. Raises :class:`NoProviderConfigured`."""
    spec = settings.get("model")
    if spec:
        return str(spec)
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4.1-mini"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    raise NoProviderConfigured()


@dataclass(slots=True)
class Resolved:
    """What a command runs with: the agent's options, the skills folders (with labels), the
    model's spec and price (``None`` when unknown), whether answers are plain text, and the
    configured MCP servers (``{name: settings}``, as ``plait.mcp.servers_from_mapping`` takes)."""

    options: AgentOptions
    folders: list[SkillFolder]
    spec: str
    price: Price | None
    plain: bool
    mcp: dict[str, dict[str, Any]]


def agent_options(
    settings: Settings,
    *,
    on_retry: Callable[[RetryNotice], None] | None = None,
    model: Model | None = None,
) -> Resolved:
    """Build the model (unless ``model`` is given) and the agent's options from ``settings``.

    ``on_retry`` is told of each retry of a model call. Raises
    :class:`~plait.errors.ConfigurationError` (no provider, bad spec, missing key).
    """
    from plait.cli.providers import provider_model

    spec = model_spec(settings) if model is None else getattr(model, "name", "model")
    chosen = model if model is not None else provider_model(spec, settings, settings.get("timeout"))
    if on_retry is not None:
        _report_retries(chosen, on_retry)
    chosen = with_fallbacks(chosen, settings)
    folders = skill_folders(
        [], settings.get("skills", []), use_standard=bool(settings.get("default_skills"))
    )
    prompt = settings.get("system_prompt")
    options = AgentOptions(
        model=chosen,
        skills=[folder.path for folder in folders],
        mode=Mode(settings.get("mode")),
        store=settings.get("store"),
        allow_scripts=bool(settings.get("allow_scripts")),
        sandbox=SandboxChoice(settings.get("sandbox")),
        max_input_tokens=int(settings.get("limits.max_input_tokens")),
        limits=_limits(settings),
        system_prompt=DEFAULT_SYSTEM_PROMPT if prompt is None else prompt,
        workspace=bool(settings.get("workspace.enabled", True)),
        workspace_allow=frozenset(settings.get("workspace.allow") or ()),
        workspace_network=bool(settings.get("workspace.network")),
        model_settings=model_settings(settings),
        extra_middleware=subagents_middleware(settings, chosen),
    )
    return Resolved(
        options=options,
        folders=folders,
        spec=spec,
        price=price_for(spec, _prices(settings)),
        plain=bool(settings.get("plain")),
        mcp={name: server.settings() for name, server in settings.section("mcp").items()},
    )


THINKING_EFFORTS = ("minimal", "low", "medium", "high")


def reasoning_setting(value: str) -> Reasoning:
    """``--thinking`` as :class:`~plait.models.base.Reasoning`: a number is a token budget
    (Anthropic's ``budget_tokens``), ``minimal``/``low``/``medium``/``high`` an effort (with a
    readable summary asked for, so OpenAI's reasoning can be shown), ``off`` turns thinking off.
    Anything else is a :class:`~plait.errors.ConfigurationError`."""
    from plait.models.base import Reasoning

    text = value.strip().lower()
    if text in ("off", "none", "no"):
        return Reasoning(enabled=False)
    if text in THINKING_EFFORTS:
        return Reasoning(effort=text, summary="auto")  # type: ignore[arg-type]
    if text.isdigit() and int(text) > 0:
        return Reasoning(budget_tokens=int(text))
    raise ConfigurationError(
        f"--thinking takes a token budget (e.g. 4096), {', '.join(THINKING_EFFORTS)} or off, "
        f"not {value!r}."
    )


def model_settings(settings: Settings) -> ModelSettings | None:
    """``--temperature``, ``--max-tokens`` and ``--thinking`` as the agent's
    :class:`~plait.models.base.ModelSettings` (``None`` when none is given)."""
    from plait.models.base import ModelSettings

    temperature = settings.get("temperature")
    max_tokens = settings.get("max_tokens")
    thinking = settings.get("thinking")
    if temperature is None and max_tokens is None and thinking is None:
        return None
    return ModelSettings(
        temperature=temperature,
        max_tokens=max_tokens,
        reasoning=None if thinking is None else reasoning_setting(str(thinking)),
    )


def _limits(settings: Settings) -> Limits | None:
    """``[limits]`` as the agent's :class:`~plait.runtime.agent.Limits` (``None``: defaults)."""
    from plait.runtime.agent import Limits

    given = {
        key: settings.get(f"limits.{key}")
        for key in ("model_calls_per_turn", "tool_timeout")
        if settings.get(f"limits.{key}") is not None
    }
    return Limits(**given) if given else None


def _report_retries(model: Model, on_retry: Callable[[RetryNotice], None]) -> None:
    from plait.models.retrying import Backoff

    backoff = getattr(model, "backoff", None)
    if isinstance(backoff, Backoff):
        setattr(model, "backoff", replace(backoff, on_retry=on_retry))  # noqa: B010


def _prices(settings: Settings) -> dict[str, Price]:
    table = dict(PRICES)
    for name, price in settings.section("prices").items():
        table[name] = Price(price.input, price.output, price.cache_read, price.cache_write)
    return table
