"""``RememberLoadedSkills``: carry a manager's loaded skills across processes, through the thread.

A :class:`~plait.skills.managed.manager.SkillManager` keeps its initialized skills in memory, one
manager per conversation. When a conversation outlives its process (``plait run --thread …``, a
web worker per request) the next process builds a fresh manager with nothing loaded. This
middleware records the loaded skill names in the thread state after every dispatch and, on the
first turn a manager serves for a thread, loads them again before anything else runs.

Only names are stored (never a body), and a skill that no longer loads is reported with a
:class:`~plait.skills.managed.events.SkillRestoreFailed` event and skipped. Place it *before*
the manager's hooks::

    agent = Agent(model, middleware=[RememberLoadedSkills(manager), *manager.middleware])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from plait.middleware.base import Middleware, Next
from plait.middleware.context import DispatchContext, TurnContext
from plait.middleware.ordering import Placement
from plait.skills.managed.errors import ManagerError
from plait.skills.managed.events import SkillRestoreFailed

if TYPE_CHECKING:
    from plait.skills.managed.manager import SkillManager

__all__ = ["LOADED_STATE_KEY", "RememberLoadedSkills"]

LOADED_STATE_KEY: Final = "plait.skills.managed.loaded"
"""Thread-state key holding the names of the skills loaded when the last dispatch ended."""


class RememberLoadedSkills(Middleware):
    """Record ``manager.loaded()`` in the thread state; restore it on a thread's first turn."""

    placement = Placement(before=("SkillsTurnInput",), requires=("SkillsTurnInput",))

    def __init__(self, manager: SkillManager) -> None:
        self.manager = manager
        self._restored: set[str] = set()

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        if ctx.thread_id not in self._restored:
            self._restored.add(ctx.thread_id)
            names = ctx.state.get(LOADED_STATE_KEY)
            loaded = set(self.manager.loaded())
            for name in names if isinstance(names, list) else []:
                if not isinstance(name, str) or name in loaded:
                    continue
                try:
                    await self.manager.load(name, ctx)
                except ManagerError as err:
                    ctx.emit(SkillRestoreFailed(skill=name, error=str(err)))
        await next()

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        await next()
        ctx.state[LOADED_STATE_KEY] = sorted(self.manager.loaded())
