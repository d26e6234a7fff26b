"""Typed answers: how a turn asks for, streams, validates and retries a structured output.

The agent's ``output_type`` (anything but ``str``) gives each turn an :class:`OutputRun`:

======================  ==================================================================
mode                    how the model is asked
======================  ==================================================================
``"native"``            ``ModelRequest.output_schema`` (OpenAI ``response_format`` /
                        Responses ``text.format`` / Anthropic ``output_config.format``, a
                        strict schema); the answer text is the JSON
``"tool"``              a ``final_result`` tool whose arguments are the output, offered with
                        the other tools; a valid call ends the turn
``"auto"`` (default)    native where the model declares ``supports_native_output = True``,
                        else tool
======================  ==================================================================

Validation failure (the type's, or an ``@agent.output_validator`` raising
:class:`~plait.errors.OutputRetry`) is sent back to the model: in native mode as a user retry
prompt after its answer, in tool mode as the ``final_result`` call's error result (so the pair is
intact), and a text answer in tool mode gets a prompt to call the tool. At most
``output_retries`` (default 1) such retries per turn; then
:class:`~plait.errors.OutputValidationError` with the raw answer, after the dispatch is persisted:
the thread never holds an unanswered call.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias

from plait.errors import ConfigurationError, OutputRetry, OutputValidationError, ToolError
from plait.messages import AssistantMessage, Message, ToolCall, ToolDefinition, UserMessage
from plait.middleware.context import DispatchContext, EventSink
from plait.models.base import (
    ModelRequest,
    ModelResponse,
    OutputSchema,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from plait.runtime.events import OutputDeltaReceived
from plait.runtime.output_schema import OutputSpec
from plait.tools import Tool, ToolContext

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "FINAL_RESULT_TOOL",
    "OutputDeltaReceived",
    "OutputMode",
    "OutputRun",
    "OutputValidator",
]

OutputMode: TypeAlias = Literal["native", "tool", "auto"]
OutputValidator: TypeAlias = Callable[[Any], Any | Awaitable[Any]]
"""``fn(output) -> output`` (sync or async); raise :class:`~plait.errors.OutputRetry` to reject."""

DEFAULT_OUTPUT_RETRIES = 1
"""Retries a turn gives the model to produce a valid output (``Agent(output_retries=...)``)."""

FINAL_RESULT_TOOL = "final_result"

MAX_PARTIAL_CHARS = 1_000_000
"""Characters of a streamed answer parsed for :class:`OutputDeltaReceived` events; past it, no more
partial events (the final output still arrives)."""

_MIN_PARSE_STEP = 16
"""A prefix is parsed again once it grew by this many characters or an eighth of its length,
whichever is more, so parsing a streamed answer costs O(n) overall, not O(n²)."""


def resolve_mode(mode: OutputMode, model: object) -> Literal["native", "tool"]:
    """The mode a turn uses with ``model``; ``"native"`` on a model that declares
    ``supports_native_output = False`` raises ``ConfigurationError``."""
    declared = getattr(model, "supports_native_output", None)
    if mode == "auto":
        return "native" if declared is True else "tool"
    if mode == "native" and declared is False:
        raise ConfigurationError(
            f"Model {getattr(model, 'name', model)!r} has no native structured output; use "
            "output_mode='tool' (or 'auto')."
        )
    if mode not in ("native", "tool"):
        raise ConfigurationError(f"output_mode must be 'native', 'tool' or 'auto'; got {mode!r}.")
    return mode


class _FinalResultTool(Tool):
    """The ``final_result`` tool of one turn: validates its arguments into the output."""

    def __init__(self, run: OutputRun) -> None:
        super().__init__(
            ToolDefinition(
                FINAL_RESULT_TOOL,
                "Give your final answer: call this tool once with the answer as its arguments. "
                "It ends the turn.",
                run.spec.schema,
                metadata={"output": True},
            )
        )
        self._run = run

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        run = self._run
        raw = json.dumps(args, ensure_ascii=False)
        try:
            value = await run.validated(lambda: run.spec.validate_args(args))
        except ValueError as exc:
            run.reject(raw, str(exc))
            raise ToolError(
                f"Invalid final_result: {exc}. Call final_result again with corrected arguments."
            ) from exc
        run.accept(raw, value)
        return "Final result accepted."


class OutputRun:
    """One turn's structured output: the tool or schema to offer, what arrived, the retries."""

    def __init__(
        self,
        spec: OutputSpec[Any],
        mode: Literal["native", "tool"],
        retries: int,
        validators: Sequence[OutputValidator] = (),
    ) -> None:
        self.spec, self.mode, self.retries = spec, mode, retries
        self.validators = list(validators)
        self.failures = 0
        self._counted = 0
        self.value: Any = None
        self.raw = ""
        self.done = False
        self.error: OutputValidationError | None = None
        self._errors: list[str] = []
        self._chunks: list[str] = []  # this dispatch's streamed JSON, as it arrived
        self._length = 0
        self._final_index: int | None = None
        self._last_partial: Any = None
        self._parsed_at = 0

    # --- the request ----------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        return [_FinalResultTool(self)] if self.mode == "tool" else []

    def request(self, request: ModelRequest) -> ModelRequest:
        if self.mode != "native":
            return request
        schema = OutputSchema(self.spec.name, self.spec.schema, strict=True)
        return request.replace(output_schema=schema)

    # --- validation -----------------------------------------------------------------------

    async def validated(self, parse: Callable[[], Any]) -> Any:
        """``parse()`` then every validator in order; ``OutputRetry`` becomes ``ValueError``."""
        value = parse()
        for validator in self.validators:
            try:
                result = validator(value)
                if inspect.isawaitable(result):
                    result = await result
            except OutputRetry as retry:
                raise ValueError(retry.reason) from retry
            value = result
        return value

    def accept(self, raw: str, value: Any) -> None:
        self.raw, self.value, self.done = raw, value, True

    def reject(self, raw: str, problem: str) -> None:
        self.raw, self._errors = raw, [problem]
        self.failures += 1
        if self.failures > self.retries:
            self.error = OutputValidationError(raw, list(self._errors), self.retries)

    async def settle(self, response: ModelResponse, d: DispatchContext) -> None:
        """After a dispatch's tools ran (before it is persisted): judge a text answer, and add
        the retry prompt to the dispatch when another try is due."""
        self._chunks, self._length, self._final_index = [], 0, None
        self._parsed_at = 0
        counted, self._counted = self._counted, self.failures
        finals = final_calls(response.tool_calls)
        if finals and not self.done and self.error is None and self.failures == counted:
            # rejected before it ran (a guard refused its arguments): still one try spent
            self.reject(finals[-1].raw_args or json.dumps(finals[-1].args), "call rejected")
            self._counted = self.failures
        if self.done or self.error is not None or response.tool_calls:
            return
        if self.mode == "native":
            try:
                value = await self.validated(lambda: self.spec.validate_json(response.content))
            except ValueError as exc:
                self.reject(response.content, str(exc))
                prompt = (
                    f"Your answer did not validate: {exc}. Answer again with JSON that matches "
                    "the schema."
                )
            else:
                self.accept(response.content, value)
                return
        else:
            self.reject(response.content, "the model answered in text, not with final_result")
            prompt = "Give your answer by calling the final_result tool; a text answer is not read."
        self._counted = self.failures
        if self.error is None:
            d.add_message(UserMessage(prompt, metadata={"output_retry": self.failures}))

    def finished(self) -> bool:
        """Whether the turn has its output; raises the ``OutputValidationError`` when the
        retries ran out. ``False``: dispatch again (tools ran, or a retry is due)."""
        if self.error is not None:
            raise self.error
        return self.done

    # --- streaming ------------------------------------------------------------------------

    def observe(self, event: StreamEvent, d: DispatchContext, emit: EventSink) -> None:
        """Turn streamed JSON (the native answer text, or the ``final_result`` call's argument
        fragments) into :class:`OutputDeltaReceived` events. Throttled (see ``_MIN_PARSE_STEP``) and
        kept as chunks joined only when parsed, so a long answer costs O(n); the stream's end
        always parses what arrived."""
        final = isinstance(event, ResponseComplete)
        if isinstance(event, TextDelta) and self.mode == "native":
            piece = event.text
        elif isinstance(event, ToolCallDelta) and self.mode == "tool":
            if event.name == FINAL_RESULT_TOOL and self._final_index is None:
                self._final_index = event.index
            if event.index != self._final_index:
                return
            piece = event.args_fragment
        elif not final:
            return
        else:
            piece = ""
        if piece:
            self._chunks.append(piece)
            self._length += len(piece)
        length = self._length
        if not length or length > MAX_PARTIAL_CHARS:
            return
        if not final and length - self._parsed_at < max(_MIN_PARSE_STEP, self._parsed_at // 8):
            return
        if final and length == self._parsed_at:
            return
        self._parsed_at = length
        partial = self.spec.partial("".join(self._chunks))
        if partial is not None and partial != self._last_partial:
            self._last_partial = partial
            emit(OutputDeltaReceived(dispatch=d.index, partial=partial))


def final_calls(calls: Sequence[ToolCall]) -> list[ToolCall]:
    """The ``final_result`` calls among ``calls``."""
    return [c for c in calls if c.name == FINAL_RESULT_TOOL]


def stored_output(messages: Sequence[Message], spec: OutputSpec[Any]) -> Any:
    """The last structured answer in ``messages`` (as persisted: the model's own JSON text or
    ``final_result`` arguments), validated again with ``spec``. Raises ``LookupError`` when the
    thread holds no answer, ``ValueError`` when the stored one no longer validates."""
    failed: ValueError | None = None
    for message in reversed(messages):
        if not isinstance(message, AssistantMessage):
            continue
        for call in reversed(message.tool_calls):
            if call.name == FINAL_RESULT_TOOL:
                try:
                    return spec.validate_args(call.args)
                except ValueError as exc:  # a rejected try: an earlier one may validate
                    failed = failed or exc
        if not message.tool_calls and message.text.strip():
            return spec.validate_json(message.text)
    if failed is not None:
        raise failed
    raise LookupError("the thread holds no structured answer")
