"""The streamed answer of a run (Server-Sent Events), imported only where Starlette is.

:class:`RunResponse` holds its run (:meth:`~plait.serve.runs.Run.hold`) from the moment the
handler makes it until the response has ended, whichever way it ends: streamed to its end, the
client gone while it streamed, or gone before its first byte (then Starlette never starts the
body). At that end it closes the body and, for the request that owns the run, cancels the run if
it still runs and waits until its turn has settled, the way a stream ``break`` does. Holding
the run keeps its events, result and error for the body to read, however many other runs
finish meanwhile (:data:`~plait.serve.runs.REPLAYS_KEPT` later ones would compact it).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from starlette.responses import StreamingResponse

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from plait.serve.runs import Run

__all__ = ["RunResponse"]


class RunResponse(StreamingResponse):
    """``body`` streamed as ``media_type``; ``run`` held until the response ends, then, with
    ``settle`` (the owner's cancel), settled if it still runs."""

    def __init__(
        self,
        run: Run | None,
        body: AsyncGenerator[str, None],
        *,
        settle: Callable[[Run], Awaitable[None]] | None = None,
        media_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(body, media_type=media_type, headers=headers)
        self._run = run
        self._body = body
        self._settle = settle
        if run is not None:
            run.hold()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            run = self._run
            try:
                await self._body.aclose()
                if run is not None and self._settle is not None and not run.done:
                    await self._settle(run)
            finally:
                if run is not None:
                    run.release()
