"""Assembling the agent that ``plait run`` / ``plait chat`` drive.

The CLI's agent is an ordinary :class:`~plait.Agent`: the chosen model, the skills battery in the
chosen mode, the workspace toolset on the current folder with its project instructions
(``AGENTS.md``, ``CLAUDE.md``), and context management (overflow recovery, summarization, result
eviction) writing to the same data directory as the thread store.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from plait.errors import ConfigurationError
from plait.models.registry import MODEL_SPEC_FORMS

if TYPE_CHECKING:
    from plait.middleware.base import Middleware
    from plait.models.base import Model, ModelSettings
    from plait.runtime.agent import Agent, Limits
    from plait.skills import FilesystemSource
    from plait.skills.managed import ScriptConfig
    from plait.tools import Tool
    from plait.workspace import Approver

__all__ = [
    "AgentOptions",
    "Closer",
    "Mode",
    "NoProviderConfigured",
    "build_agent",
    "mcp_log_dir",
    "with_log_files",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are a capable assistant. Use the available skills and tools when they fit the task; "
    "read a skill's instructions before following it. Answer concisely."
)


class Mode(StrEnum):
    DISCLOSURE = "disclosure"
    MANAGED = "managed"


class SandboxChoice(StrEnum):
    """What runs skill scripts (``--sandbox``): bubblewrap, or (explicitly) nothing."""

    BWRAP = "bwrap"
    NONE = "none"


class NoProviderConfigured(ConfigurationError):
    """No ``--model`` was given and no provider key is in the environment."""

    def __init__(self) -> None:
        forms = ", ".join(MODEL_SPEC_FORMS)
        super().__init__(
            "No model provider is configured. Set OPENAI_API_KEY or ANTHROPIC_API_KEY "
            "(or PLAIT_MODEL to a model spec), or pass --model with one of: "
            f"{forms} (e.g. --model openai-compatible:llama3.1@http://localhost:11434/v1). "
            "To see plait work with no provider at all, run: plait demo"
        )


@dataclass(slots=True)
class AgentOptions:
    """Everything ``build_agent`` needs; the CLI fills it from its flags."""

    model: Model
    skills: Sequence[Path] = ()
    mode: Mode = Mode.DISCLOSURE
    store: str | Path | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_input_tokens: int = 100_000
    evict_over_tokens: int = 2_000
    allow_scripts: bool = False
    sandbox: SandboxChoice = SandboxChoice.BWRAP
    limits: Limits | None = None
    extra_middleware: list[Middleware] = field(default_factory=list)
    mcp: dict[str, Any] = field(default_factory=dict)
    """MCP servers, ``{name: settings}`` (see :func:`plait.mcp.servers_from_mapping`)."""
    leading_middleware: list[Middleware] = field(default_factory=list)
    """Placed before every other middleware (the trace recorder, so it sees each call whole)."""
    workspace: bool = True
    """The workspace toolset (:mod:`plait.workspace`) on ``workspace_root`` and the project's
    ``AGENTS.md`` / ``CLAUDE.md`` in the system prompt (``--no-workspace``: neither)."""
    workspace_root: Path | None = None
    """Default: the current folder."""
    workspace_allow: frozenset[str] = frozenset()
    """Gated actions allowed without asking (``--yes``: ``{"write", "shell"}``)."""
    workspace_approve: Approver | Literal["pause"] | None = None
    """Asked for a gated call ``workspace_allow`` does not cover; ``None``: such calls are
    refused (a run with no terminal to ask at)."""
    workspace_network: bool = False
    model_settings: ModelSettings | None = None
    """The agent's model settings (``--temperature``, ``--max-tokens``, ``--thinking``)."""


Closer = Callable[[], Awaitable[None]]


async def build_agent(options: AgentOptions) -> tuple[Agent, list[Closer]]:
    """The agent for ``options`` and, in order, what to await when done with it: finish the
    background history offload, close a skill manager, close the MCP servers, the model's
    HTTP client, the results database and the thread store. MCP servers connect on the first
    turn. If building fails, what was already opened is closed before the error propagates."""
    from plait.cli.db import open_backend, open_thread_store, store_target

    target = store_target(str(options.store) if options.store is not None else None)
    closers: list[Closer] = []
    try:
        store = open_thread_store(target)
        closers.append(store.aclose)
        backend = open_backend(store, target)
        closers.insert(0, backend.aclose)
        agent, opened = await _assemble(options, store, backend)
    except BaseException:
        await _close_quietly([options.model.aclose, *closers])
        raise
    return agent, [*opened, options.model.aclose, *closers]


async def _assemble(options: AgentOptions, store: Any, backend: Any) -> tuple[Agent, list[Closer]]:
    """The agent over ``store`` and ``backend``, and what to close first when done (see
    :func:`build_agent`); on failure it closes what it opened itself and raises."""
    # Imported here: every plait command imports this module, only run and chat build agents.
    from plait.context import (
        OverflowRecoveryMiddleware,
        ResultEvictionMiddleware,
        SummarizationMiddleware,
    )
    from plait.runtime.agent import Agent
    from plait.skills import FilesystemSource

    summarization = SummarizationMiddleware(options.max_input_tokens, backend=backend)
    # A skill's instructions are read whole (the spec's "exempt skill content from
    # compaction"): read_file results are never evicted.
    eviction = ResultEvictionMiddleware(
        options.evict_over_tokens, backend=backend, excluded_tools=["read_file"]
    )
    middleware: list[Middleware] = [
        *options.leading_middleware,
        OverflowRecoveryMiddleware(summarization=summarization, eviction=eviction),
        summarization,
        eviction,
    ]
    closers: list[Closer] = [summarization.drain]
    for leading in options.leading_middleware:
        aclose = getattr(leading, "aclose", None)
        if aclose is not None:
            closers.append(aclose)
    tools: list[Tool] = []
    try:
        sources = [FilesystemSource(Path(p)) for p in options.skills]
        skills_middleware: list[Middleware] = []
        if sources:
            skills_middleware, close_skills = await _skills(options, sources)
            if close_skills is not None:
                closers.append(close_skills)
        if options.workspace:
            tools, project = _workspace(options, skills_middleware, closers)
            middleware.append(project)
        middleware.extend(skills_middleware)
        middleware.extend(options.extra_middleware)
        if options.mcp:
            from plait.mcp import McpToolset, servers_from_mapping

            toolset = McpToolset(servers_from_mapping(with_log_files(options.mcp)))
            middleware.append(toolset)
            closers.append(toolset.aclose)
        agent = Agent(
            options.model,
            tools=tools,
            middleware=middleware,
            system_prompt=options.system_prompt,
            store=store,
            limits=options.limits,
            model_settings=options.model_settings,
        )
    except BaseException:
        await _close_quietly(closers)
        raise
    return agent, closers


def mcp_log_dir() -> Path:
    """Where stdio MCP servers' stderr goes: ``mcp-logs/<server>.log`` in the CLI's data folder
    (:func:`plait.cli.db.data_dir`), one file per server, at most
    :data:`plait.mcp.stdio.MAX_LOG_BYTES` each (plus the previous one, ``<server>.log.1``)."""
    from plait.cli.db import data_dir

    return data_dir() / "mcp-logs"


def with_log_files(servers: dict[str, Any]) -> dict[str, Any]:
    """``servers`` (``{name: settings}``) with a ``log_file`` in :func:`mcp_log_dir` for each
    stdio server that names none: their logs stay off the terminal."""
    folder = mcp_log_dir()
    given: dict[str, Any] = {}
    for name, settings in servers.items():
        if isinstance(settings, dict) and "command" in settings and "log_file" not in settings:
            safe = re.sub(r"[^A-Za-z0-9._-]", "_", str(name))[:64].lstrip(".") or "server"
            settings = {**settings, "log_file": str(folder / f"{safe}.log")}
        given[name] = settings
    return given


def _workspace(
    options: AgentOptions, skills: list[Middleware], closers: list[Closer]
) -> tuple[list[Tool], Middleware]:
    """The workspace tools and the project-context middleware. In disclosure mode the
    workspace's ``read_file`` falls back to the skills middleware's, so a skill path and a
    workspace path are read through one tool name."""
    from plait.skills.disclosure import SkillsMiddleware
    from plait.workspace import ProjectContext, Workspace

    root = options.workspace_root or Path.cwd()
    fallback = next((m.read_tool for m in skills if isinstance(m, SkillsMiddleware)), None)
    workspace = Workspace(
        str(root),
        allow=options.workspace_allow,
        approve=options.workspace_approve,
        network=options.workspace_network,
        read_fallback=fallback,
    )
    closers.append(workspace.aclose)
    return workspace.tools(), ProjectContext(root)


async def _close_quietly(closers: list[Closer]) -> None:
    """Await every closer in order; a failure to close is dropped (an error is on its way)."""
    for close in closers:
        with contextlib.suppress(Exception):
            await close()


async def _skills(
    options: AgentOptions, sources: list[FilesystemSource]
) -> tuple[list[Middleware], Closer | None]:
    if options.mode is Mode.DISCLOSURE:
        from plait.skills.catalog import Precedence
        from plait.skills.disclosure import SkillsMiddleware

        # Folders come highest precedence first (plait.cli.skill_folders), as plait skills list
        # and managed mode read them: the earlier folder wins a name clash.
        return [SkillsMiddleware(sources=sources, precedence=Precedence.FIRST_WINS)], None
    from plait.skills.managed import RememberLoadedSkills, create_skill_manager

    async def allow(ctx: Any, tool: str, args: Any) -> None:
        return None  # the person at the terminal asked for managed mode; no further gate

    manager = await create_skill_manager(
        sources=sources,
        gate=allow,
        scripts=_script_config(options) if options.allow_scripts else None,
    )
    # Each `plait run` is a new process with a new manager: the thread remembers what was loaded.
    return [RememberLoadedSkills(manager), *manager.middleware], manager.aclose


def _script_config(options: AgentOptions) -> ScriptConfig:
    from plait.sandbox import BubblewrapSandbox, Sandbox, UnsandboxedRunner
    from plait.skills.managed import ScriptConfig

    none = options.sandbox is SandboxChoice.NONE
    sandbox: Sandbox = UnsandboxedRunner() if none else BubblewrapSandbox()
    return ScriptConfig(sandbox=sandbox)
