"""Retention: deleting what eviction and history offload wrote, so the backend does not grow
without bound (deepagents #2055).

Everything is laid out per thread (see :mod:`plait.context.offload`), so a thread's files are
one ``ls`` away and an evicted result's age is in its name:

* :class:`RetentionPolicy` keeps at most ``max_per_thread`` evicted results per thread and none
  older than ``max_age`` seconds. :class:`~plait.context.ResultEvictionMiddleware` applies it to
  a thread after each eviction in that thread.
* :func:`apply_retention` applies a policy to every thread under a root (run it from a
  scheduled job).
* :func:`purge_thread` deletes everything written for one thread (call it when the thread is
  deleted from the thread store).

Only names that carry the eviction timestamp are expired by a policy; :func:`purge` and
:func:`purge_thread` delete everything under their prefix.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from plait.context.offload import EVICTED_ROOT, HISTORY_ROOT, thread_prefix, written_at
from plait.errors import ConfigurationError
from plait.paths import normalize_virtual_path

__all__ = [
    "DEFAULT_RETENTION",
    "PrunableBackend",
    "RetentionPolicy",
    "apply_retention",
    "enforce",
    "expired",
    "purge",
    "purge_thread",
]


@runtime_checkable
class PrunableBackend(Protocol):
    """The part of a backend retention needs: listing and deleting."""

    async def ls(self, prefix: str = "") -> list[str]: ...

    async def delete(self, path: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """``max_age`` in seconds and ``max_per_thread`` files; ``None`` disables either bound."""

    max_age: float | None = 7 * 24 * 3600.0
    max_per_thread: int | None = 200

    def __post_init__(self) -> None:
        if self.max_age is not None and self.max_age <= 0:
            raise ConfigurationError("RetentionPolicy.max_age must be positive seconds or None.")
        if self.max_per_thread is not None and self.max_per_thread < 1:
            raise ConfigurationError("RetentionPolicy.max_per_thread must be at least 1 or None.")


DEFAULT_RETENTION = RetentionPolicy()
"""Seven days, 200 evicted results per thread."""


def expired(
    paths: Iterable[str], policy: RetentionPolicy, *, now: float | None = None
) -> list[str]:
    """Which of one thread's ``paths`` the policy deletes: too old, or oldest beyond the cap."""
    stamped = sorted((t, p) for p in paths if (t := written_at(p)) is not None)
    now = time.time() if now is None else now
    doomed: list[str] = []
    if policy.max_age is not None:
        cutoff = now - policy.max_age
        doomed = [p for t, p in stamped if t < cutoff]
        stamped = [(t, p) for t, p in stamped if t >= cutoff]
    if policy.max_per_thread is not None and len(stamped) > policy.max_per_thread:
        doomed += [p for _, p in stamped[: len(stamped) - policy.max_per_thread]]
    return doomed


async def _delete(backend: PrunableBackend, paths: Sequence[str]) -> list[str]:
    return [p for p in paths if await backend.delete(p)]


async def purge(backend: PrunableBackend, prefix: str) -> list[str]:
    """Delete every path under ``prefix``; return the deleted paths."""
    return await _delete(backend, await backend.ls(normalize_virtual_path(prefix)))


async def purge_thread(
    backend: PrunableBackend,
    thread_id: str,
    *,
    roots: Sequence[str] = (EVICTED_ROOT, HISTORY_ROOT),
) -> list[str]:
    """Delete everything eviction and history offload wrote for ``thread_id``."""
    deleted: list[str] = []
    for root in roots:
        deleted += await purge(backend, thread_prefix(root, thread_id))
    return deleted


async def enforce(
    backend: PrunableBackend, prefix: str, policy: RetentionPolicy, *, now: float | None = None
) -> list[str]:
    """Apply ``policy`` to the one thread folder ``prefix``; return the deleted paths."""
    return await _delete(backend, expired(await backend.ls(prefix), policy, now=now))


async def apply_retention(
    backend: PrunableBackend,
    policy: RetentionPolicy,
    *,
    root: str = EVICTED_ROOT,
    now: float | None = None,
) -> list[str]:
    """Apply ``policy`` to every thread folder under ``root``; return the deleted paths."""
    by_thread: dict[str, list[str]] = {}
    for path in await backend.ls(normalize_virtual_path(root)):
        by_thread.setdefault(path.rsplit("/", 1)[0], []).append(path)
    doomed: list[str] = []
    for paths in by_thread.values():
        doomed += expired(paths, policy, now=now)
    return await _delete(backend, doomed)
