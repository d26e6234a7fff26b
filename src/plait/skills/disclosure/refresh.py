"""When a thread's load refreshes the shared catalog: at once, in the background, or not at all.

:class:`CatalogRefresher` is the freshness policy of :class:`~.middleware.SkillsMiddleware`
(stale-while-revalidate): a new thread is served the catalog already in memory; when that is
``interval`` seconds old or more, one refresh starts in the background, shared by every thread
(at most one runs at a time). A forced refresh (a reset of ``skills_metadata``,
``auto_refresh``), the process's first load, ``interval=0`` (strict mode) and a background
refresh lost with its event loop (each ``run_sync`` ends one) refresh before the call instead.

:attr:`CatalogRefresher.error` keeps the last unexpected error of a background refresh (it is
also logged on the ``plait.skills`` logger: nobody awaits that task); any refresh that succeeds
afterwards, background or foreground, clears it. A foreground refresh that fails raises into
the turn that asked for it and leaves :attr:`~CatalogRefresher.error` as it was.
"""

from __future__ import annotations

import asyncio
import logging
import time

from plait.skills.catalog import SkillCatalog

__all__ = ["DEFAULT_REFRESH_INTERVAL", "DEFAULT_WAIT_S", "CatalogRefresher"]

DEFAULT_REFRESH_INTERVAL = 2.0
"""Seconds a catalog refresh serves new threads; the first new thread after that starts one
refresh in the background and, like every other, is served the current catalog meanwhile."""

DEFAULT_WAIT_S = 30.0
"""Seconds :meth:`CatalogRefresher.wait` waits for a background refresh by default."""

_log = logging.getLogger("plait.skills")


class CatalogRefresher:
    """Refreshes ``catalog`` for new threads, at most once per ``interval`` seconds in the
    background (see the module docstring). Locks are per running event loop, so a refresh
    stranded in a loop that ended never blocks a later loop's."""

    def __init__(self, catalog: SkillCatalog, interval: float) -> None:
        self.catalog = catalog
        self.interval = interval
        self.error: Exception | None = None
        self._refreshed_at = -float("inf")
        self._lock = asyncio.Lock()
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._background: asyncio.Task[None] | None = None

    async def refresh(self, force: bool) -> None:
        """Refresh the catalog now when ``force``d, on the first load, with ``interval=0``, or
        when the last background refresh never finished (its event loop ended first, as after
        each ``run_sync``); otherwise start a background refresh when the catalog is
        ``interval`` seconds old and return at once. Callers share one refresh."""
        if not force and self._serve_current():
            if time.monotonic() - self._refreshed_at >= self.interval:
                self._revalidate()
            return
        async with self._loop_lock():
            if not force and self._serve_current():
                return  # another caller's refresh finished while this one waited
            await self.catalog.refresh()
            self._refreshed_at = time.monotonic()
            self.error = None
            if self._background_lost():
                self._background = None  # (not one a new thread started meanwhile)

    async def wait(self, deadline: float = DEFAULT_WAIT_S) -> bool:
        """Wait up to ``deadline`` seconds for a background refresh in flight; ``True`` when
        none is running any more. Does not cancel it when the deadline passes. One left in an
        event loop no longer running counts as not running."""
        task = self._background
        if task is None or task.done() or self._background_lost():
            return True
        done, _ = await asyncio.wait({task}, timeout=deadline)
        return bool(done)

    def _loop_lock(self) -> asyncio.Lock:
        """The refresh lock of the running event loop (see ``SkillCatalog._loop_lock``)."""
        loop = asyncio.get_running_loop()
        if self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def _serve_current(self) -> bool:
        """Whether a new thread may be served the current catalog: it is loaded, refreshes may
        run behind, and none was lost."""
        loaded = self.catalog.loaded and self.interval > 0
        return loaded and not self._background_lost()

    def _background_lost(self) -> bool:
        """Whether the last background refresh was cancelled, or belongs to an event loop no
        longer running (it will never finish)."""
        task = self._background
        return task is not None and (
            task.cancelled() or task.get_loop() is not asyncio.get_running_loop()
        )

    def _revalidate(self) -> None:
        """Start the shared background refresh unless one is running."""
        if self._background is not None and not self._background.done():
            return
        self._refreshed_at = time.monotonic()  # at most one refresh per interval, even failing
        self._background = asyncio.get_running_loop().create_task(self._refresh_behind())

    async def _refresh_behind(self) -> None:
        try:
            async with self._loop_lock():
                await self.catalog.refresh()
                self._refreshed_at = time.monotonic()
            self.error = None
        except Exception as error:  # nobody awaits this task: log and keep it, never lose it
            self.error = error
            _log.warning("Background refresh of the skill catalog failed: %r", error)
