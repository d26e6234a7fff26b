"""The server's bounds (:class:`ServeLimits`), each with its default, and where they bite.

=========================  ========  ===========================================================
field                      default   what happens past it
=========================  ========  ===========================================================
``max_body_bytes``         1 MiB     413 ``body_too_large`` (the body is read at most this far)
``max_concurrent_runs``    1000      a new run waits up to ``queue_timeout`` for a slot, then
                                     503 ``server_busy``
``max_waiting_per_thread`` 8         a run queued behind others on its thread (this worker)
                                     beyond this answers 429 ``thread_busy``
``queue_timeout``          30 s      a run that did not get its thread and a slot in this time
                                     answers 503 ``server_busy`` / 429 ``thread_busy``
``run_timeout``            600 s     a turn still running is cancelled (it settles: what it
                                     persisted stays) and ends with ``deadline_exceeded``
``idle_timeout``           120 s     a turn that emits no event in this time is cancelled alike
``keepalive_interval``     15 s      an SSE comment line is sent when no event was, so proxies
                                     keep the stream open
``max_threads_listed``     1000      ``GET /threads`` answers at most this many
=========================  ========  ===========================================================

Why 1000 turns at once: a running turn mostly waits on its model, and costs a coroutine and
the thread's messages while it does, so the bound is there against a runaway, not to ration
the worker. Real model calls take seconds: with 10-second turns, the old bound of 64 capped a
worker at 6.4 turns/s while its CPU sat idle. ``plait serve`` sets every field by a flag of the
same name (``--max-concurrent-runs``, ``--run-timeout``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from plait.errors import ConfigurationError

__all__ = ["ServeLimits"]


@dataclass(slots=True, frozen=True)
class ServeLimits:
    """Bounds on requests and runs (see the module table)."""

    max_body_bytes: int = 1 << 20
    max_concurrent_runs: int = 1000
    max_waiting_per_thread: int = 8
    queue_timeout: float = 30.0
    run_timeout: float = 600.0
    idle_timeout: float = 120.0
    keepalive_interval: float = 15.0
    max_threads_listed: int = 1000

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_concurrent_runs", "max_waiting_per_thread"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"ServeLimits.{name} must be at least 1.")
        for name in ("queue_timeout", "run_timeout", "idle_timeout", "keepalive_interval"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(
                    f"ServeLimits.{name} must be a positive number of seconds."
                )
