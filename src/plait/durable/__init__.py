"""Durable turns on DBOS (``pip install 'plait[dbos]'``): a turn survives its worker's death.

:class:`DurableAgent` runs an agent's turns as DBOS workflows whose thread load, appends, model
calls and tool calls are steps; another worker recovers a dead one's turns without re-running
what completed. See ``plait/durable/README.md``. DBOS is imported only when this package is
used.
"""

from __future__ import annotations

from plait.lazy import lazy_exports

TYPE_CHECKING = False  # not typing's: importing this package must not import typing

if TYPE_CHECKING:
    from plait.durable.agent import (
        RESUME_WORKFLOW_NAME,
        WORKFLOW_NAME,
        DurableAgent,
        dbos_config,
        recover_turns,
    )
    from plait.durable.errors import DurabilityError, ReplayDivergence
    from plait.durable.journal import Journal
    from plait.durable.store import JournaledStore

__all__ = [
    "RESUME_WORKFLOW_NAME",
    "WORKFLOW_NAME",
    "DurabilityError",
    "DurableAgent",
    "Journal",
    "JournaledStore",
    "ReplayDivergence",
    "dbos_config",
    "recover_turns",
]

# Hidden from type checkers, which then check every name against the imports above.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.durable.agent": (
                "RESUME_WORKFLOW_NAME",
                "WORKFLOW_NAME",
                "DurableAgent",
                "dbos_config",
                "recover_turns",
            ),
            "plait.durable.errors": ("DurabilityError", "ReplayDivergence"),
            "plait.durable.journal": ("Journal",),
            "plait.durable.store": ("JournaledStore",),
        },
    )
