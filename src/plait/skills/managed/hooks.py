"""The manager's middleware set: four hooks, each its own :class:`~plait.middleware.Middleware`
object so each can be placed on its own in the agent's list.

================  ==========================================================  =================
hook              responsibility                                              placement
================  ==========================================================  =================
turn_input        hydrate initialized skills (tools + body/handle) onto the   early, before
                  fresh context; with ``auto_refresh``, refresh the catalog    anything that reads
                  (flags updates, never swaps). Failure → ``ctx.abort``.      the registry
dispatch_input    integrity repair: unregister tools of skills unloaded       before budget /
                  elsewhere, re-assert projections after a mid-turn load.     thrift middleware
                  Failure → ``ctx.nack``.
dispatch_output   keep body reads out of the messages persisted next          after execution,
                  (placeholders), reconcile, observe. Not a commit point.     before persistence
                  Failure → ``ctx.nack``.
turn_output       strip every projection *before* ``next()``, so downstream  head of the
                  output middleware never sees a skill body or tool.          turn-output chain
================  ==========================================================  =================

With nothing initialized and nothing projected on the context the dispatch hooks only call
``next()``; ``turn_output`` still strips the residue of a skill unloaded mid-turn. The set always
has all four hooks, whatever the configuration.

``SkillsTurnOutput`` declares ``Placement(position="outermost")``, so the agent pins it at the head
of the turn-output chain wherever it is listed. Each object overrides only its own hook, so the
whole set can simply go first:
``Agent(model, middleware=[*manager.middleware, *others])`` puts ``turn_input`` early,
``dispatch_input`` before budgets and ``turn_output`` at the head of the output chain.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plait.middleware.base import Middleware, Next
from plait.middleware.context import DispatchContext, TurnContext
from plait.middleware.ordering import Placement
from plait.tools import Tool

if TYPE_CHECKING:
    from plait.skills.managed.manager import SkillManager

__all__ = [
    "SkillMiddlewareSet",
    "SkillsDispatchInput",
    "SkillsDispatchOutput",
    "SkillsTurnInput",
    "SkillsTurnOutput",
    "create_skill_middleware_set",
    "skills_dispatch_input_middleware",
    "skills_dispatch_output_middleware",
    "skills_turn_input_middleware",
    "skills_turn_output_middleware",
]


class _SkillsHook(Middleware):
    label = "skills"

    def __init__(self, manager: SkillManager) -> None:
        self.manager = manager

    @property
    def name(self) -> str:
        return f"skills.{self.label}"


class SkillsTurnInput(_SkillsHook):
    """Hydrates the fresh turn; also contributes the lifecycle tools (``tools()``)."""

    label = "turn_input"

    def tools(self) -> Sequence[Tool]:
        return self.manager.tools()

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        try:
            await self.manager.hydrate(ctx)
        except Exception as err:
            ctx.abort(err)
            return
        await next()


class SkillsDispatchInput(_SkillsHook):
    label = "dispatch_input"

    async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
        if self.manager.active_on(ctx.turn):
            try:
                self.manager.reconcile(ctx.turn)
            except Exception as err:
                ctx.nack(err)
                return
        await next()


class SkillsDispatchOutput(_SkillsHook):
    label = "dispatch_output"

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        if self.manager.active_on(ctx.turn):
            try:
                self.manager.observe(ctx)
            except Exception as err:
                ctx.nack(err)
                return
        await next()


class SkillsTurnOutput(_SkillsHook):
    label = "turn_output"
    # At the head of turn_output: strip before any output middleware can see a projection.
    placement = Placement(position="outermost")

    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        try:
            self.manager.strip(ctx)
        except Exception as err:
            ctx.abort(err)  # never hand downstream a context that may still hold a body
            return
        await next()


def skills_turn_input_middleware(manager: SkillManager) -> SkillsTurnInput:
    return SkillsTurnInput(manager)


def skills_dispatch_input_middleware(manager: SkillManager) -> SkillsDispatchInput:
    return SkillsDispatchInput(manager)


def skills_dispatch_output_middleware(manager: SkillManager) -> SkillsDispatchOutput:
    return SkillsDispatchOutput(manager)


def skills_turn_output_middleware(manager: SkillManager) -> SkillsTurnOutput:
    return SkillsTurnOutput(manager)


@dataclass(frozen=True, slots=True)
class SkillMiddlewareSet:
    """The four hooks. Iterating yields them in the order that is right when the set goes
    first in the agent's list: turn_input, dispatch_input, dispatch_output, turn_output."""

    turn_input: SkillsTurnInput
    dispatch_input: SkillsDispatchInput
    dispatch_output: SkillsDispatchOutput
    turn_output: SkillsTurnOutput

    def __iter__(self) -> Iterator[Middleware]:
        yield self.turn_input
        yield self.dispatch_input
        yield self.dispatch_output
        yield self.turn_output


def create_skill_middleware_set(manager: SkillManager) -> SkillMiddlewareSet:
    """A new set of the four hooks for ``manager`` (``manager.middleware`` is one)."""
    return SkillMiddlewareSet(
        SkillsTurnInput(manager),
        SkillsDispatchInput(manager),
        SkillsDispatchOutput(manager),
        SkillsTurnOutput(manager),
    )
