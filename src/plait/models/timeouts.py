"""Deadlines for model calls: connect and read timeouts, and one overall deadline per call.

==========  =======  =========================================================================
field       default  bounds
==========  =======  =========================================================================
``connect``  10 s    opening the connection (TCP and TLS) to the provider
``read``    300 s    the longest wait for the next bytes; a non-streaming call receives nothing
                     until the whole answer is ready, so this also bounds one generation
``total``   600 s    the whole call: every attempt, every backoff sleep between retries, and a
                     stream until its last event
==========  =======  =========================================================================

So a server that accepts the connection and never answers holds a turn for at most ``total``
seconds (it used to be 4 attempts of 600 s each), after which the call raises
:class:`~plait.errors.ModelTimeoutError`. Give a model its own with
``OpenAIChatModel(..., timeouts=ModelTimeouts(total=120))`` (likewise ``AnthropicModel``),
``resolve_model(spec, timeouts=...)``, or, for the CLI and any model built from a spec,
``PLAIT_MODEL_TIMEOUT=120`` (sets ``total``).

Any other model (your own :class:`~plait.models.base.Model`, a scripted one) gets its overall
deadline from the agent: ``Agent(limits=Limits(model_timeout=...))``, default
:data:`DEFAULT_MODEL_TIMEOUT` (600 s, the same as ``total``), applied per model call by
:func:`agent_deadline`. A model that keeps its own (a ``timeouts`` attribute holding
``ModelTimeouts``, as both adapters do) is not timed twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from plait.errors import ConfigurationError, ModelTimeoutError

if TYPE_CHECKING:
    from plait.models.base import ModelRequest, ModelResponse

__all__ = [
    "DEFAULT_MODEL_TIMEOUT",
    "CallDeadline",
    "ModelTimeouts",
    "agent_deadline",
    "parse_timeout",
]

T = TypeVar("T")

DEFAULT_MODEL_TIMEOUT = 600.0
"""Seconds one model call may take in all, by default: ``ModelTimeouts.total`` for the
adapters, ``Limits.model_timeout`` for every other model."""

ModelHandler = Callable[["ModelRequest"], Awaitable["ModelResponse"]]


@dataclass(frozen=True, slots=True)
class ModelTimeouts:
    """Connect, read and overall timeouts of one model call, in seconds (see the module table).

    Each must be a number > 0; ``math.inf`` turns one off.
    """

    connect: float = 10.0
    read: float = 300.0
    total: float = DEFAULT_MODEL_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("connect", "read", "total"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigurationError(
                    f"ModelTimeouts.{name} must be a number of seconds > 0 (math.inf for none), "
                    f"got {value!r}."
                )

    def sdk_timeout(self, timeout_type: Callable[..., T]) -> T:
        """The SDK's ``Timeout`` (``openai.Timeout``, ``anthropic.Timeout``) for these values;
        write and pool timeouts are ``read``."""
        return timeout_type(_finite(self.read), connect=_finite(self.connect))

    def start(self, model: str) -> CallDeadline:
        """The deadline of one call of ``model`` starting now (inside a running event loop)."""
        return CallDeadline(self, model)


def parse_timeout(value: str | float, origin: str) -> float:
    """``value`` (a setting's text, or a number already parsed) as a timeout in seconds: a
    number > 0, where ``inf`` (``math.inf``, ``"inf"``, ``1e400``) means no deadline. NaN, zero,
    a negative number or text that is no number raise :class:`~plait.errors.ConfigurationError`
    naming ``origin`` (``$PLAIT_MODEL_TIMEOUT``, ``--timeout``, a config key), with one message
    wherever the value came from. The CLI's ``--timeout``, its config files'
    ``timeout``/``limits.tool_timeout`` and ``$PLAIT_MODEL_TIMEOUT`` all go through here."""
    seconds = float("nan")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            seconds = float(value.strip())
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    if not seconds > 0:
        shown = repr(value) if isinstance(value, str) else str(value)
        raise ConfigurationError(
            f"{origin}={shown} is not a number of seconds > 0; give e.g. 120, or inf for no "
            "deadline."
        )
    return seconds


def _finite(seconds: float) -> float | None:
    return None if seconds == float("inf") else seconds


class CallDeadline:
    """The overall deadline of one model call; :meth:`within` bounds each wait by it."""

    def __init__(self, timeouts: ModelTimeouts, model: str) -> None:
        self.timeouts = timeouts
        self.model = model
        self.at = asyncio.get_running_loop().time() + timeouts.total
        self.attempts = 0

    def remaining(self) -> float:
        return self.at - asyncio.get_running_loop().time()

    def error(self) -> ModelTimeoutError:
        t = self.timeouts
        return ModelTimeoutError(self.model, t.total, self.attempts, t.connect, t.read)

    async def within(self, wait: Awaitable[T]) -> T:
        """Await ``wait``; raise :class:`~plait.errors.ModelTimeoutError` if the deadline passes
        first (``wait`` is cancelled). A ``TimeoutError`` raised by ``wait`` itself passes."""
        if self.timeouts.total == float("inf"):
            return await wait
        scope = asyncio.timeout_at(self.at)
        try:
            async with scope:
                return await wait
        except TimeoutError:
            if scope.expired():
                raise self.error() from None
            raise


def agent_deadline(handler: ModelHandler, model: object, seconds: float) -> ModelHandler:
    """``handler`` (one call of ``model``, a stream consumed to its end included) bounded by an
    overall deadline of ``seconds``: past it the call is cancelled and
    :class:`~plait.errors.ModelTimeoutError` raised, naming ``Limits(model_timeout=...)``.

    ``handler`` itself when ``seconds`` is ``math.inf`` or when ``model`` keeps its own
    deadline (a ``timeouts`` attribute holding :class:`ModelTimeouts`), so the adapters are not
    timed twice. A call that completes without suspending (a scripted model) never needs a
    timer and gets none; a call that returns an awaitable other than a coroutine (a future) is
    bounded all the same. A ``TimeoutError`` the call raises itself passes unchanged.
    """
    if seconds == float("inf") or isinstance(getattr(model, "timeouts", None), ModelTimeouts):
        return handler

    async def bounded(request: ModelRequest) -> ModelResponse:
        running = handler(request)
        waiting: Awaitable[ModelResponse] = running
        if isinstance(running, Coroutine):
            try:
                first = running.send(None)
            except StopIteration as done:
                return cast("ModelResponse", done.value)
            waiting = Resumed(running, first)
        # (Any other awaitable, e.g. a future from run_in_executor, is bounded from the start.)
        scope = asyncio.timeout(seconds)
        try:
            async with scope:
                return await waiting
        except TimeoutError:
            if not scope.expired():
                raise
            name = str(getattr(model, "name", type(model).__name__))
            raise ModelTimeoutError(
                name, seconds, 1, remedy="Limits(model_timeout=...) on the agent"
            ) from None

    return bounded


class Resumed:
    """Awaits a coroutine that already ran its first step and yielded ``first`` (the future it
    waits on): the rest of ``await coro``, sends and throws (cancellation) passed through.

    Lets a deadline be armed only once a call has suspended: most calls of a scripted model or
    an in-process tool finish in their first step, and a timer per call costs ~10 µs.
    """

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self.coro = coro
        self.first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        pending = self.first
        while True:
            try:
                sent = yield pending
            except BaseException as exc:
                try:
                    pending = self.coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    pending = self.coro.send(sent)
                except StopIteration as done:
                    return done.value
