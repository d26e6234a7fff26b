"""The durable battery's errors."""

from __future__ import annotations

from plait.errors import PlaitError

__all__ = ["DurabilityError", "ReplayDivergence"]


class DurabilityError(PlaitError):
    """A durable turn cannot run as asked: DBOS is missing, not launched, or configured with a
    serializer that is not JSON. The message says what to install or pass."""


class ReplayDivergence(DurabilityError):
    """A recovered turn did not retrace its journal: at a recorded step the turn now asks for
    something else (a model request offering other tools, a tool call of another name or id).

    The turn's code (middleware, tools, prompts) must decide the same way on replay as in the
    first run; see ``plait/durable/README.md`` ("What must be deterministic"). Nothing past the
    diverging step runs; the thread holds what the first run persisted."""

    def __init__(self, workflow_id: str, step: str, recorded: str, now: str) -> None:
        self.workflow_id = workflow_id
        self.step = step
        self.recorded = recorded
        self.now = now
        super().__init__(
            f"Durable turn {workflow_id!r} diverged from its journal at {step}: the journal "
            f"recorded {recorded}, the replay asked for {now}. Make the middleware and tools "
            "decide the same way on every run (no clock, randomness or outside state in what "
            "they offer or call), or cancel the workflow and start the turn again."
        )
