"""``RepetitionDetector``: notice a model that is going round in circles.

Two patterns, both checked after every model call against the thread's earlier assistant
messages (scanning back at most a window, so the cost does not grow with the history):

* the same tool call(s) with the same arguments ``max_identical_calls`` times in a row (a user
  message breaks the run: asking again is not looping);
* ``text_window`` consecutive assistant outputs whose word sets overlap by at least
  ``text_similarity`` (Jaccard) and whose tool calls (if any) are the same, ignoring outputs
  shorter than ``min_text_chars``.

Both look within the current turn only (the user's message that started it ends the scan):
three questions answered alike are three answers, not a loop.

It fires once per episode (latched): exactly when a run reaches its threshold, not again while
the run continues; a different response ends the episode. The ``policy`` decides what happens:
``"note"`` shows the model a message telling it it is repeating itself, for the rest of the
turn (projected into the requests like a skill body, never stored: the thread holds only what
the user wrote), ``"error"`` ends the turn with :class:`RepetitionError` (nothing of the repeated
dispatch is persisted, so no call is left without a result). Both emit
:class:`~plait.runtime.events.RepetitionDetected`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Literal

from plait.errors import PlaitError
from plait.messages import AssistantMessage, Message, ToolCall, UserMessage
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse
from plait.runtime.events import RepetitionDetected

__all__ = ["RepetitionDetector", "RepetitionError", "jaccard"]

_WORD = re.compile(r"\w+")
_NOTE_SOURCE = "repetition_guard"


class RepetitionError(PlaitError):
    """The model repeated itself and the detector's policy is ``"error"``."""

    def __init__(self, kind: str, count: int) -> None:
        self.kind = kind
        self.count = count
        what = "the same tool call" if kind == "tool_call" else "near-identical text"
        super().__init__(
            f"The model produced {what} {count} times in a row; the turn was ended. "
            "Rephrase the request, or use RepetitionDetector(policy='note') to let it recover."
        )


def jaccard(a: str, b: str) -> float:
    """Word-set Jaccard similarity of two texts, case-insensitive (1.0 for two empty texts)."""
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    if not wa and not wb:
        return 1.0
    return len(wa & wb) / len(wa | wb)


def _same_calls(a: Sequence[ToolCall], b: Sequence[ToolCall]) -> bool:
    """Whether two responses make the same calls (names and arguments, in any order).

    Compares the argument dicts structurally: no serialization on the per-dispatch path.
    """
    if len(a) != len(b):
        return False
    if len(a) == 1:
        x, y = a[0], b[0]
        return x.name == y.name and x.raw_args == y.raw_args and x.args == y.args
    rest = list(b)
    for x in a:
        for k, y in enumerate(rest):
            if x.name == y.name and x.raw_args == y.raw_args and x.args == y.args:
                del rest[k]
                break
        else:
            return False
    return True


def _previous_assistants(
    messages: Sequence[Message], stop_at_user: bool
) -> Iterator[AssistantMessage]:
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            yield message
        elif (
            stop_at_user
            and isinstance(message, UserMessage)
            # the detector's own note is not the user asking again: it must not end the run,
            # or the latched detector would fire again every ``max_identical_calls`` calls
            and message.metadata.get("source") != _NOTE_SOURCE
        ):
            return


class RepetitionDetector(Middleware):
    """A default guard (with ``policy="note"``): an ``after_model_call`` middleware pinned
    outermost, so it sees the response every other middleware produced."""

    placement = Placement(position="outermost")

    def __init__(
        self,
        *,
        max_identical_calls: int = 3,
        text_similarity: float = 0.9,
        text_window: int = 3,
        min_text_chars: int = 20,
        policy: Literal["note", "error"] = "note",
    ) -> None:
        if max_identical_calls < 2 or text_window < 2:
            raise ValueError("max_identical_calls and text_window must be at least 2")
        self.max_identical_calls = max_identical_calls
        self.text_similarity = text_similarity
        self.text_window = text_window
        self.min_text_chars = min_text_chars
        self.policy = policy

    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        history = ctx.turn.messages
        if response.tool_calls and self._call_run(response, history) == self.max_identical_calls:
            self._fire(ctx, "tool_call", self.max_identical_calls)
        content = response.content
        if (
            len(content) >= self.min_text_chars  # strip() only for text long enough to count
            and len(content.strip()) >= self.min_text_chars
            and self._text_run(response, history) == self.text_window
        ):
            self._fire(ctx, "text", self.text_window)
        return response

    def _call_run(self, response: ModelResponse, history: Sequence[Message]) -> int:
        # _previous_assistants(history, stop_at_user=True), inlined: this runs on every model
        # call, and most runs end at the first assistant message.
        calls, run = response.tool_calls, 1
        for previous in reversed(history):
            if isinstance(previous, AssistantMessage):
                if run > self.max_identical_calls or not previous.tool_calls:
                    break
                if not _same_calls(previous.tool_calls, calls):
                    break
                run += 1
            elif (
                isinstance(previous, UserMessage)
                and previous.metadata.get("source") != _NOTE_SOURCE
            ):
                break
        return run

    def _text_run(self, response: ModelResponse, history: Sequence[Message]) -> int:
        # Outputs repeat only if their tool calls match too: the same "Let me search…" before
        # searches with different arguments is progress, not a loop.
        run, current = 1, response.content.strip()
        calls = response.tool_calls
        for previous in _previous_assistants(history, stop_at_user=True):
            earlier = previous.text.strip()
            if run > self.text_window or len(earlier) < self.min_text_chars:
                break
            if not _same_calls(previous.tool_calls, calls):
                break
            if jaccard(current, earlier) < self.text_similarity:
                break
            run, current = run + 1, earlier
        return run

    def _fire(self, ctx: DispatchContext, kind: str, count: int) -> None:
        ctx.turn.emit(
            RepetitionDetected(dispatch=ctx.index, kind=kind, count=count, policy=self.policy)
        )
        if self.policy == "error":
            raise RepetitionError(kind, count)
        what = (
            "the same tool call with the same arguments"
            if kind == "tool_call"
            else ("nearly the same answer")
        )
        # Projected for the rest of the turn, never stored: the thread holds only what the
        # user wrote; the RepetitionDetected event records what the detector did.
        ctx.turn.ephemeral.append(
            UserMessage(
                f"Note: you have produced {what} {count} times in a row. It is not making "
                "progress. Change your approach: use different arguments or another tool, or "
                "answer with what you have.",
                metadata={"source": _NOTE_SOURCE, "kind": kind},
            )
        )
