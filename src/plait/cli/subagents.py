"""The CLI's fallback models (``--fallback``, ``fallback = [...]``) and subagents
(``[subagents.NAME]`` in plait.toml).

::

    model = "anthropic:claude-sonnet-4-5"
    fallback = ["openai:gpt-4.1"]

    [subagents.researcher]
    description = "Researches a question and answers with sources."
    model = "openai:gpt-4.1-mini"     # default: the agent's own model
    system = "Research the question; answer briefly, with sources."
    skills = ["./research-skills"]    # its own skills (disclosure mode); default: none

Each subagent becomes a :class:`~plait.subagents.Subagent` of one
:class:`~plait.subagents.Subagents` middleware (the ``task`` tool); its runs go into the same
thread store, on the thread ``<thread>/<call id>``, and its usage into the turn's usage line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from plait.errors import ConfigurationError

if TYPE_CHECKING:
    from plait.cli.config import Settings
    from plait.middleware.base import Middleware
    from plait.models.base import Model

__all__ = ["FallbackOption", "subagents_middleware", "with_fallbacks"]

FallbackOption = Annotated[
    list[str] | None,
    typer.Option(
        "--fallback",
        help="A model to try when the one before it is down, overloaded or rate limited "
        "(repeatable, in order; same spec forms as --model). Default: fallback in plait.toml.",
    ),
]


def _model(spec: str, timeout: float | None) -> Model:
    from plait.models.registry import resolve_model

    if timeout is None:
        return resolve_model(spec)
    from plait.models.timeouts import ModelTimeouts

    return resolve_model(spec, timeouts=ModelTimeouts(total=timeout))


def with_fallbacks(model: Model, settings: Settings) -> Model:
    """``model`` followed by the ``fallback`` setting's models (a
    :class:`~plait.models.FallbackModel` that owns them), or ``model`` when there are none."""
    specs = settings.get("fallback") or []
    if not specs:
        return model
    from plait.models.fallback import FallbackModel

    timeout = settings.get("timeout")
    return FallbackModel([model, *(_model(s, timeout) for s in specs)], owns=True)


def subagents_middleware(settings: Settings, model: Model) -> list[Middleware]:
    """One :class:`~plait.subagents.Subagents` over the ``[subagents.NAME]`` tables (none when
    there are none). A bad table raises :class:`~plait.errors.ConfigurationError`."""
    tables: dict[str, Any] = settings.section("subagents")
    if not tables:
        return []
    from plait.runtime.agent import Agent
    from plait.subagents import Subagent, Subagents

    agents: dict[str, Subagent] = {}
    for name, table in tables.items():
        config = table if isinstance(table, dict) else table.model_dump(exclude_none=True)
        middleware: list[Middleware] = []
        skills = [Path(p).expanduser() for p in config.get("skills") or []]
        missing = [str(p) for p in skills if not p.exists()]
        if missing:
            raise ConfigurationError(
                f"[subagents.{name}] skills folder not found: {', '.join(missing)}."
            )
        if skills:
            from plait.skills import SkillsMiddleware

            middleware.append(SkillsMiddleware(sources=skills))
        spec = config.get("model")
        child = Agent(
            _model(spec, settings.get("timeout")) if spec else model,
            system_prompt=config.get("system") or "",
            middleware=middleware,
        )
        description = config.get("description") or f"The {name} subagent."
        agents[name] = Subagent(description, child)
    return [Subagents(agents)]


def progress_line(event: object, verbose: bool) -> str | None:
    """The one line ``plait run`` shows for a subagent's or a fallback's event, or ``None`` to
    show nothing: a subagent's start and end (every event of it with ``--verbose``), a model
    call moved to a fallback."""
    from plait.runtime.events import (
        ModelCallRerouted,
        SubagentEventRelayed,
        TurnFinished,
        TurnStarted,
    )

    if isinstance(event, ModelCallRerouted):
        return f"{event.failed} failed ({event.error}); trying {event.next}"
    if not isinstance(event, SubagentEventRelayed):
        return None
    who = f"{'  ' * (event.depth - 1)}subagent {event.name}"
    inner = event.event
    if isinstance(inner, TurnStarted):
        return f"→ {who} started (thread {event.thread_id})"
    if isinstance(inner, TurnFinished):
        return f"← {who} answered"
    return f"  {who}: {inner.type}" if verbose else None
