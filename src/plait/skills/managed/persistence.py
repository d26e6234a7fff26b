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

from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from plait.errors import ConfigurationError
from plait.middleware.base import Middleware, Next
from plait.middleware.context import DispatchContext, TurnContext
from plait.middleware.ordering import Placement
from plait.skills.managed.errors import ManagerError
from plait.skills.managed.events import SkillRestoreFailed

if TYPE_CHECKING:
    from plait.skills.managed.manager import SkillManager

__all__ = ["DEFAULT_MAX_THREADS", "LOADED_STATE_KEY", "RememberLoadedSkills"]

LOADED_STATE_KEY: Final = "plait.skills.managed.loaded"
"""Thread-state key holding the names of the skills loaded when the last dispatch ended."""

DEFAULT_MAX_THREADS: Final = 10_000
"""How many thread ids a :class:`RememberLoadedSkills` remembers as already restored."""


class RememberLoadedSkills(Middleware):
    """Record ``manager.loaded()`` in the thread state; restore it on a thread's first turn.

    The thread ids already restored are kept in a least-recently-used table of at most
    ``max_threads`` entries (default :data:`DEFAULT_MAX_THREADS`), so a long-lived server with
    many conversations does not grow without bound. A thread pushed out of the table is restored
    again on its next turn, which is harmless: skills already loaded are skipped. A
    ``max_threads`` below 1 is a :class:`~plait.errors.ConfigurationError`.
    """

    placement = Placement(before=("SkillsTurnInput",), requires=("SkillsTurnInput",))

    def __init__(self, manager: SkillManager, *, max_threads: int = DEFAULT_MAX_THREADS) -> None:
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ConfigurationError(
                f"RememberLoadedSkills max_threads must be a whole number >= 1, got "
                f"{max_threads!r}: pass how many thread ids to remember as restored"
            )
        self.manager = manager
        self.max_threads = max_threads
        self._restored: OrderedDict[str, None] = OrderedDict()

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        if ctx.thread_id in self._restored:
            self._restored.move_to_end(ctx.thread_id)
        else:
            self._restored[ctx.thread_id] = None
            while len(self._restored) > self.max_threads:
                self._restored.popitem(last=False)
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
