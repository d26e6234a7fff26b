"""The app each ``plait serve`` worker runs, built from environment variables.

uvicorn starts every worker (``--workers N``) from an import string, so ``plait serve`` passes
its choices through the environment and each worker builds its own agents at startup
(:func:`app_from_env`, a uvicorn app factory):

===========================  ==================================================================
variable                     meaning
===========================  ==================================================================
``PLAIT_SERVE_TARGET``       ``module:attribute``: an ``Agent``, a mapping name → ``Agent``, or
                             a function returning either; empty: the agent of ``plait.toml``
``PLAIT_SERVE_TOKEN``        the bearer token (empty: none)
``PLAIT_SERVE_STORE``        the thread store for a ``plait.toml`` agent (as ``--store``)
``PLAIT_SERVE_CORS``         origins allowed by CORS, comma-separated (empty: CORS off)
``PLAIT_SERVE_TOOL_CALLS``   ``hidden`` or ``text`` (the OpenAI route's agent tool calls)
``PLAIT_SERVE_TRACE``        ``1``: record a ``plait.toml`` agent's turns for ``plait ui``
``PLAIT_SERVE_LIMITS``       JSON object of :class:`~plait.serve.ServeLimits` fields to set
                             (empty: the defaults)
===========================  ==================================================================
"""

from __future__ import annotations

import gc
import importlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from plait.errors import ConfigurationError

if TYPE_CHECKING:
    from plait.runtime.agent import Agent

__all__ = ["app_from_env", "load_target"]

Closer = Callable[[], Awaitable[None]]


def load_target(target: str) -> Agent | dict[str, Agent]:
    """The agent(s) named by ``module:attribute`` (the current folder is importable)."""
    from plait.runtime.agent import Agent

    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"{target!r} is not module:attribute (e.g. myapp:agent).")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"Cannot load {target!r}: {exc}.") from exc
    if callable(found) and not isinstance(found, Agent):
        found = found()
    if isinstance(found, Agent):
        return found
    if isinstance(found, Mapping) and found and all(isinstance(a, Agent) for a in found.values()):
        return {str(k): v for k, v in found.items()}
    raise ConfigurationError(
        f"{target!r} is a {type(found).__name__}; it must be an Agent, a mapping of names to "
        "Agents, or a function returning one."
    )


async def _config_agent(store: str | None, trace: bool) -> tuple[Agent, list[Closer]]:
    from plait.cli.agents import build_agent
    from plait.cli.options import Flags, agent_options, merged_settings

    resolved = agent_options(merged_settings(Flags()))
    if store:
        resolved.options.store = store
    if trace:
        from plait.cli.ui import open_trace_store
        from plait.trace import TraceRecorder

        recorder = TraceRecorder(open_trace_store(resolved.options.store), agent="plait")
        resolved.options.leading_middleware.insert(0, recorder)
    return await build_agent(resolved.options)


class _WorkerApp:
    """An ASGI app that builds the agents at lifespan startup, then serves them."""

    def __init__(self) -> None:
        self.inner: Any = None
        self.closers: list[Closer] = []

    async def _start(self) -> None:
        from plait.serve import ServeLimits, create_app

        target = os.environ.get("PLAIT_SERVE_TARGET", "")
        if target:
            agents: Any = load_target(target)
        else:
            agent, self.closers = await _config_agent(
                os.environ.get("PLAIT_SERVE_STORE") or None,
                os.environ.get("PLAIT_SERVE_TRACE") == "1",
            )
            agents = agent
        cors = [o for o in os.environ.get("PLAIT_SERVE_CORS", "").split(",") if o]
        tool_calls = os.environ.get("PLAIT_SERVE_TOOL_CALLS") or "hidden"
        self.inner = create_app(
            agents,
            token=os.environ.get("PLAIT_SERVE_TOKEN") or None,
            limits=ServeLimits(**json.loads(os.environ.get("PLAIT_SERVE_LIMITS") or "{}")),
            cors_origins=cors,
            tool_calls=cast(Any, tool_calls),
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    try:
                        await self._start()
                    except Exception as exc:
                        await send({"type": "lifespan.startup.failed", "message": str(exc)})
                        return
                    _freeze_startup_objects()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    for close in self.closers:
                        await close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await self.inner(scope, receive, send)


def _freeze_startup_objects() -> None:
    """Leave what startup made (imported modules, the agents, their schemas: most of the
    worker's objects) out of every later garbage collection, ``gc.freeze()``. Without it a full
    collection walks them all: pauses of 100-170 ms every few hundred requests, which set the
    tail latency (``bench/serve_load.py``); with it a full collection walks only what requests
    made since."""
    gc.collect()
    gc.freeze()


def app_from_env() -> Any:
    """The worker's ASGI app (a uvicorn factory); access logs go to standard error."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    access = logging.getLogger("plait.serve.access")
    if not access.handlers:
        access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False
    return _WorkerApp()
