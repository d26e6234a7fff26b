"""Runs: one turn of one agent on one thread, driven in a task, its events kept for readers.

Every protocol (AG-UI, OpenAI-compatible, threads/runs) starts a :class:`Run` through one
:class:`RunManager` and reads its events; none drives a turn itself.

- **Serialized per thread.** A run waits for its thread's turn in this worker (a lock per
  thread id), and the store's lease serializes the turns of several workers. At most
  ``max_waiting_per_thread`` runs queue on one thread; one more answers 429 ``thread_busy``.
- **Bounded overall.** At most ``max_concurrent_runs`` turns run at once; a run waits at most
  ``queue_timeout`` for its thread and a slot together.
- **Deadlines.** A turn is cancelled after ``run_timeout`` or ``idle_timeout`` without an event;
  the turn runs in the run's task (``agent.run`` with ``on_event``), so the cancellation
  reaches it there: it settles and everything it persisted stays (the same path as a client
  that disconnects: :meth:`RunManager.cancel`).
- **Kept, bounded.** Finished runs are remembered (newest ``MAX_RUNS_KEPT``) so their result
  can be read back. The newest ``REPLAYS_KEPT`` to finish keep their events for a replay;
  older ones keep only what their view shows (:meth:`Run.compact`), so a worker that served
  thousands of turns does not hold each one's events and messages. A run is compacted only
  once nothing holds it (:meth:`Run.hold`: a reader streaming it, the request answering it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plait.messages import Message, new_id
from plait.middleware.context import Event
from plait.serve.errors import ServeError
from plait.serve.limits import ServeLimits
from plait.serve.pauses import CLIENT_REASON
from plait.serve.run_board import CANCEL_POLL

if TYPE_CHECKING:
    from plait.runtime.agent import Agent
    from plait.runtime.pause import Decision, OnPaused
    from plait.runtime.turn import RunResult
    from plait.serve.run_board import RunBoard

__all__ = ["MAX_RUNS_KEPT", "REPLAYS_KEPT", "Run", "RunManager"]

MAX_RUNS_KEPT = 1000
"""Finished runs a worker remembers for ``GET .../runs/{id}``; older ones answer 404."""
REPLAYS_KEPT = 100
"""Finished runs (the newest to finish) whose events ``GET .../runs/{id}/stream`` replays; an
older one streams only its final ``run`` event. Holding every remembered run's events and
messages made each full garbage collection walk ~50 objects a run: 17-36 ms at 1000 runs on
the 2-core bench machine, a pause every request in flight waits out (0.2-0.4 ms without)."""

logger = logging.getLogger("plait.serve")

TERMINAL = frozenset({"success", "error", "cancelled", "paused"})

_NO_EVENTS: list[Event] = []
"""The events of every compacted run (shared: nothing is pushed to a run once it ended)."""
_ENDED = asyncio.Event()
"""The ``changed`` of every compacted run: set for ever (a set ``asyncio.Event`` binds to no
loop; a reader of an ended run never waits on it)."""
_ENDED.set()


@dataclass(slots=True, eq=False)
class Run:
    """A run: its ids, ``status`` (``pending``, ``running``, then one of ``success``,
    ``error``, ``cancelled``, ``paused``: its turn waits on the calls of ``result.pending``),
    the plait events so far, and when it ended its :class:`~plait.runtime.turn.RunResult` or
    error."""

    run_id: str
    thread_id: str
    agent: str
    status: str = "pending"
    events: list[Event] = field(default_factory=list)
    result: RunResult | None = None
    error: BaseException | None = None
    created_at: float = field(default_factory=time.time)
    task: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    holds: int = 0
    """Holders now (:meth:`hold`: readers in :meth:`stream`, the request that owns the run); a
    run is not compacted under one."""
    compact_due: bool = False
    """:meth:`compact` was asked while the run was held: it happens at the last :meth:`release`."""
    compacted: bool = False
    frozen: bytes | None = None
    """A compacted run's view, as JSON."""

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    def compact(self) -> bool:
        """Drop what only a replay or a live reader needs from this finished run: its events,
        task, result and error, keeping its :meth:`view` as JSON (bytes, which a garbage
        collection does not walk: a remembered run is then one tracked object, not the ~20 of
        its result, usage, state and event, which made every full collection under load walk
        ~20,000 objects, 18-20 ms on the 2-core bench machine). False, and nothing dropped,
        while the run runs; while it is held (:meth:`hold`), False and it happens at the last
        :meth:`release`."""
        if not self.done:
            return False
        if self.holds:
            self.compact_due = True
            return False
        self.frozen = json.dumps(self.view(), ensure_ascii=False, default=str).encode()
        self.events = _NO_EVENTS
        self.changed = _ENDED
        self.task = None
        self.result = None
        self.error = None
        self.compacted = True
        return True

    def _push(self, event: Event) -> None:
        self.events.append(event)
        self.changed.set()

    def _end(self, status: str) -> None:
        self.status = status
        self.changed.set()

    def hold(self) -> None:
        """Keep this run's events, result and error while a holder still needs them (a request
        reads its run's answer after the run ended; meanwhile REPLAYS_KEPT other runs may
        finish, which would compact it). Each hold needs its :meth:`release`."""
        self.holds += 1

    def release(self) -> None:
        """End one :meth:`hold`; the last one compacts the run if that was asked meanwhile."""
        self.holds -= 1
        if not self.holds and self.compact_due:
            self.compact()

    async def stream(self, start: int = 0) -> AsyncIterator[Event]:
        """Its events from index ``start``, live until the run ends (any number of readers;
        none once the run is :attr:`compacted`: hold it first to be sure of them)."""
        index = start
        self.hold()
        try:
            while True:
                while index < len(self.events):
                    yield self.events[index]
                    index += 1
                if self.done:
                    return
                self.changed.clear()
                if index < len(self.events) or self.done:
                    continue
                await self.changed.wait()
        finally:
            self.release()

    async def ended(self) -> None:
        """Return once the run has ended, without waking at each of its events (a reader that
        wants them all at the end); cancelling the caller does not cancel the run."""
        if self.task is not None and not self.task.done():
            await asyncio.wait({self.task})

    def view(self) -> dict[str, Any]:
        """The run as the threads/runs API shows it."""
        if self.frozen is not None:
            view: dict[str, Any] = json.loads(self.frozen)
            return view
        error = None
        if self.error is not None:
            kind = (
                self.error.type if isinstance(self.error, ServeError) else type(self.error).__name__
            )
            error = {"type": kind, "message": str(self.error)}
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "agent": self.agent,
            "status": self.status,
            "created_at": self.created_at,
            "output": self.result.output if self.result is not None else None,
            "pending": [
                {**p.to_json(), "client": p.reason == CLIENT_REASON}
                for p in (self.result.pending if self.result is not None else ())
            ],
            "error": error,
        }


class RunManager:
    """Starts, bounds, cancels and remembers runs (see the module docstring)."""

    def __init__(self, limits: ServeLimits, board: RunBoard | None = None) -> None:
        self.limits = limits
        self.board = board
        """Where runs are shared with the other workers (:mod:`plait.serve.run_board`)."""
        self._sharing: dict[str, asyncio.Task[None]] = {}
        self._watcher: asyncio.Task[None] | None = None
        self._cancelling: dict[str, asyncio.Task[None]] = {}
        self._slots = asyncio.Semaphore(limits.max_concurrent_runs)
        self._threads: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._replays: deque[Run] = deque()
        """Finished runs still holding their events, oldest first (at most REPLAYS_KEPT)."""

    def get(self, run_id: str) -> Run | None:
        return self._runs.get(run_id)

    def runs_of(self, thread_id: str) -> list[Run]:
        return [r for r in self._runs.values() if r.thread_id == thread_id]

    def start(
        self,
        agent: Agent,
        name: str,
        thread_id: str,
        input: list[Message],
        *,
        state: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        on_paused: OnPaused = "raise",
        announce: bool = True,
    ) -> Run:
        """A new run of ``agent`` on ``thread_id`` with ``input``, started in a task; with
        ``decisions``, the run resumes the thread's paused turn instead (``input`` and
        ``state`` unused). ``on_paused`` as for ``agent.run``. With a board, the run's view
        goes on it as the run starts and again as it ends; ``announce=False`` skips the first
        write, for a run whose id no client learns before it ends (a non-streaming chat
        completion: one write a request fewer).

        Raises :class:`ServeError` 429 ``thread_busy`` when the thread already has
        ``max_waiting_per_thread`` runs queued in this worker."""
        if self._waiting.get(thread_id, 0) >= self.limits.max_waiting_per_thread:
            raise ServeError(
                429,
                "thread_busy",
                f"Thread {thread_id!r} already has {self.limits.max_waiting_per_thread} runs "
                "queued; wait for one to finish (or cancel it) and send again.",
            )
        run = Run(run_id or f"run_{new_id()}", thread_id, name)
        self._remember(run)
        self._waiting[thread_id] = self._waiting.get(thread_id, 0) + 1
        turn = _TurnSpec(input, dict(state or {}), decisions, on_paused)
        run.task = asyncio.create_task(self._drive(run, agent, turn))
        run.task.add_done_callback(lambda _: self._unstarted(run))
        if self.board is not None:
            if announce:
                self._share(run)
            run.task.add_done_callback(lambda _: self._share(run, ended=True))
            if self._watcher is None or self._watcher.done():
                self._watcher = asyncio.create_task(self._watch_cancels(self.board))
        return run

    async def published(self, run: Run, *, ended: bool = False) -> None:
        """Return once ``run``'s newest view is on the board (at once without a board), so
        that any worker finds it: a run id answered before that could be a 404 elsewhere.
        With ``ended``, once its final view is (the run's task has finished: its last write
        was queued as it did)."""
        if ended and self.board is not None and run.task is not None:
            await asyncio.wait({run.task})
        task = self._sharing.get(run.run_id)
        if task is not None:
            await asyncio.wait({task})

    def _share(self, run: Run, *, ended: bool = False) -> None:
        """Write ``run``'s view to the board in the background, in order (each write waits for
        the run's previous one and reads the view when it runs)."""
        board = self.board
        assert board is not None
        before = self._sharing.get(run.run_id)

        async def write() -> None:
            if before is not None:
                await asyncio.wait({before})
            await board.publish(run.view(), ended=ended)

        task = asyncio.create_task(write())
        self._sharing[run.run_id] = task
        if ended:
            task.add_done_callback(lambda _: self._sharing.pop(run.run_id, None))

    async def _watch_cancels(self, board: RunBoard) -> None:
        """While this worker has live runs: cancel those another worker asked to cancel."""
        while live := [r for r in self._runs.values() if not r.done]:
            await asyncio.sleep(CANCEL_POLL)  # a poll of the board, not a synchronization
            try:
                asked = set(await board.cancel_requests([r.run_id for r in live]))
            except Exception as exc:  # the store is away: try again next round
                logger.warning("cannot read cancel requests: %s", exc)
                continue
            for run in live:
                if run.run_id in asked and not run.done and run.run_id not in self._cancelling:
                    task = asyncio.create_task(self.cancel(run))
                    self._cancelling[run.run_id] = task
                    task.add_done_callback(self._cancelled)

    def _remember(self, run: Run) -> None:
        self._runs[run.run_id] = run
        while len(self._runs) > MAX_RUNS_KEPT:
            oldest = next(iter(self._runs.values()))
            if not oldest.done:
                break
            self._runs.popitem(last=False)

    def _finished(self, run: Run) -> None:
        """``run`` has ended: the run that finished REPLAYS_KEPT runs ago gives up its events
        (one still streamed to a reader keeps them)."""
        self._replays.append(run)
        while len(self._replays) > REPLAYS_KEPT:
            self._replays.popleft().compact()

    async def cancel(self, run: Run) -> None:
        """Cancel ``run`` if it still runs and return once its turn has settled."""
        task = run.task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _drive(self, run: Run, agent: Agent, turn: _TurnSpec) -> None:
        loop = asyncio.get_running_loop()
        lock = self._threads.setdefault(run.thread_id, asyncio.Lock())
        try:
            try:
                async with asyncio.timeout(self.limits.queue_timeout):
                    await lock.acquire()
            except TimeoutError:
                raise ServeError(
                    429,
                    "thread_busy",
                    f"Thread {run.thread_id!r} stayed busy for {self.limits.queue_timeout:g} s; "
                    "send again once its running turn has finished.",
                ) from None
            finally:
                self._release_waiting(run.thread_id)
            try:
                try:
                    async with asyncio.timeout(self.limits.queue_timeout):
                        await self._slots.acquire()
                except TimeoutError:
                    raise ServeError(
                        503,
                        "server_busy",
                        f"{self.limits.max_concurrent_runs} turns are running; try again shortly.",
                    ) from None
                try:
                    run.status = "running"
                    await self._turn(run, agent, turn, loop)
                finally:
                    self._slots.release()
            finally:
                lock.release()
                self._forget_idle_lock(run.thread_id)
        except asyncio.CancelledError:
            run._end("cancelled")
            raise
        except BaseException as exc:
            run.error = exc
            run._end("error")
            if not isinstance(exc, Exception):
                raise
        else:
            run._end("paused" if run.result is not None and run.result.paused else "success")
        finally:
            self._finished(run)

    def _unstarted(self, run: Run) -> None:
        """A run whose task was cancelled before it began (a client gone at once, a cancel
        right after the start) never ran ``_drive``: end it here as ``_drive`` would have (it
        was still counted among its thread's waiting runs)."""
        if run.status != "pending":  # _drive ran: every way out of it ends the run
            return
        self._release_waiting(run.thread_id)
        self._forget_idle_lock(run.thread_id)  # a run that ended meanwhile counted this one
        run._end("cancelled")
        self._finished(run)

    def _cancelled(self, task: asyncio.Task[None]) -> None:
        for run_id, t in list(self._cancelling.items()):
            if t is task:
                del self._cancelling[run_id]

    def _forget_idle_lock(self, thread_id: str) -> None:
        """Drop the thread's lock once no run holds it or waits for it."""
        lock = self._threads.get(thread_id)
        if lock is not None and not lock.locked() and not self._waiting.get(thread_id):
            del self._threads[thread_id]

    def _release_waiting(self, thread_id: str) -> None:
        left = self._waiting.get(thread_id, 1) - 1
        if left:
            self._waiting[thread_id] = left
        else:
            self._waiting.pop(thread_id, None)

    async def _turn(
        self,
        run: Run,
        agent: Agent,
        turn: _TurnSpec,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        limits = self.limits
        ends = loop.time() + limits.run_timeout
        try:
            # The turn runs in this task, its events pushed as they happen (``on_event``): no
            # RunStream task and queue between the turn and the run's readers.
            async with asyncio.timeout_at(ends) as deadline:
                idle = _IdleWatch(loop, deadline, limits.idle_timeout)

                def push(event: Event) -> None:
                    run._push(event)
                    idle.last = loop.time()

                try:
                    if turn.decisions is not None:
                        result = await agent.resume(run.thread_id, turn.decisions, on_event=push)
                    else:
                        result = await agent.run(
                            turn.input,
                            thread_id=run.thread_id,
                            state=turn.state or None,
                            on_paused=turn.on_paused,
                            on_event=push,
                        )
                finally:
                    idle.stop()
        except TimeoutError:
            which = "run_timeout" if loop.time() >= ends else "idle_timeout"
            raise ServeError(
                504,
                "deadline_exceeded",
                f"The turn passed the server's {which} "
                f"({getattr(limits, which):g} s) and was cancelled; what it had persisted stays.",
            ) from None
        run.result = result


class _IdleWatch:
    """Expires ``deadline`` once no event came for ``idle`` seconds (``last`` is the time of
    the newest): a timer that wakes once per ``idle``, not one moved at every event (which cost
    a timer each). A class, not a closure that schedules itself: that closure was a reference
    cycle per turn, left to the garbage collector."""

    __slots__ = ("deadline", "idle", "last", "loop", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, deadline: asyncio.Timeout, idle: float):
        self.loop, self.deadline, self.idle = loop, deadline, idle
        self.last = loop.time()
        self.timer = loop.call_at(self.last + idle, self._wake)

    def _wake(self) -> None:
        quiet_until = self.last + self.idle
        if self.loop.time() >= quiet_until - 0.001:  # a timer may run a clock tick early
            self.deadline.reschedule(self.loop.time())
        else:
            self.timer = self.loop.call_at(quiet_until, self._wake)

    def stop(self) -> None:
        """Cancel the timer (which also drops its reference back to this watch)."""
        self.timer.cancel()


@dataclass(slots=True, frozen=True)
class _TurnSpec:
    """What a run does: a new turn on ``input`` (``state`` first), or a resume."""

    input: list[Message]
    state: dict[str, Any]
    decisions: Mapping[str, Decision] | None
    on_paused: OnPaused
