"""The exception hierarchy shared by every layer.

Every error plait raises on purpose derives from :class:`PlaitError`, and every message says what
to do next. Batteries (skills, context) derive their own errors from these bases.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "ContentError",
    "ContextOverflowError",
    "DecisionError",
    "DispatchRejected",
    "LimitExceeded",
    "ModelResponseError",
    "ModelTimeoutError",
    "OutputRetry",
    "OutputValidationError",
    "PlaitError",
    "ProviderError",
    "ResumeConflict",
    "StoreError",
    "StoreTimeoutError",
    "ThreadBusyError",
    "ThreadConflictError",
    "ThreadNotPaused",
    "ThreadPaused",
    "ToolArgumentsError",
    "ToolError",
    "ToolExecutionError",
    "ToolResolutionError",
    "ToolTimeoutError",
    "TurnAborted",
    "clipped",
    "quoted",
]

MAX_QUOTED_CHARS = 200
"""How many characters of an outside value (a tool name, arguments, a path, a skill name from the
model) an error message repeats, by default."""


def clipped(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """``text`` itself if it has at most ``limit`` characters, else its first ``limit``
    characters followed by ``…(+N characters)``. ``limit`` below 1 is treated as 1."""
    limit = max(1, limit)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…(+{len(text) - limit} characters)"


def quoted(value: object, limit: int = MAX_QUOTED_CHARS) -> str:
    """``value`` quoted for an error message, showing at most ``limit`` of its characters.

    A string is quoted as ``repr`` would; any other value is converted with ``str`` first. Text
    longer than ``limit`` keeps its first ``limit`` characters, quoted, followed by
    ``…(+N characters)``, so a message never repeats megabytes a model sent. Escapes added by
    ``repr`` (``\\x00``, ``\\ud800``) apply to the kept characters only, so the result has at
    most ``4 * limit + 30`` characters. ``limit`` below 1 is treated as 1.
    """
    text = value if isinstance(value, str) else str(value)
    limit = max(1, limit)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}…(+{len(text) - limit} characters)"


_MAX_PROBLEMS = 10
_MAX_PROBLEM_CHARS = 2 * MAX_QUOTED_CHARS
_MAX_ERROR_CHARS = 1000
_MAX_LISTED_TOOLS = 50


class PlaitError(Exception):
    """Base class of every error plait raises deliberately."""


class ConfigurationError(PlaitError):
    """The agent, a middleware or a model was configured in a way that cannot work."""


class ContentError(PlaitError, ValueError):
    """An image, file or reasoning part that cannot be sent: an unsupported media type, bytes
    that are not what their media type says, a URL scheme other than http(s), or a part over a
    size or count limit (the message names the limit and how to stay under it). Raised before
    any request is sent."""


class ToolResolutionError(PlaitError):
    """A tool call named a tool that is not registered at the moment of the call.

    This is the *standard unknown-tool error*: the loop turns it into an error tool result the
    model can read (it lists the tools that do exist: the first 50 in name order, each name
    clipped, then how many more), never an exception out of the loop. ``available`` holds all.
    """

    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = sorted(available)
        shown = [clipped(n) for n in self.available[:_MAX_LISTED_TOOLS]]
        if len(self.available) > _MAX_LISTED_TOOLS:
            shown.append(f"and {len(self.available) - _MAX_LISTED_TOOLS} more")
        listed = ", ".join(shown) if shown else "(none)"
        super().__init__(f"Unknown tool {quoted(name)}. Available tools: {listed}.")


class ToolArgumentsError(PlaitError):
    """The model's arguments for a tool failed its schema; the message names each bad field."""

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = problems
        shown = [clipped(problem, _MAX_PROBLEM_CHARS) for problem in problems[:_MAX_PROBLEMS]]
        if len(problems) > _MAX_PROBLEMS:
            shown.append(f"and {len(problems) - _MAX_PROBLEMS} more problems")
        detail = "; ".join(shown)
        super().__init__(
            f"Invalid arguments for tool {quoted(tool)}: {detail}. "
            "Call the tool again with arguments that match its schema."
        )

    @classmethod
    def not_an_object(cls, tool: str, raw: str) -> ToolArgumentsError:
        """The error for argument text that is not a JSON object (quoted, bounded)."""
        return cls(tool, [f"arguments are not a JSON object: {quoted(raw)}"])


class ToolError(PlaitError):
    """Raise from a tool to give the model ``message`` as an error result, word for word.

    Use it for expected failures the model should read and act on ("no such customer", "the gate
    refused"); any other exception is reported as ``Tool 'x' failed: Type: message`` plus an
    error event.
    """


class OutputRetry(PlaitError):
    """Raise from an ``@agent.output_validator`` to reject a valid-looking answer: ``reason`` is
    sent to the model (as the retry prompt, or the ``final_result`` call's error result) and it
    answers again, within the agent's ``output_retries``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class OutputValidationError(PlaitError):
    """The model's answer did not validate against the output type after ``output_retries``
    retries. ``raw`` is the last answer as the model gave it (JSON text or the ``final_result``
    arguments), ``errors`` what was wrong with it. Every message of the turn is persisted and the
    thread stays valid (no call without its result): run again, raise ``output_retries``, or
    simplify the output type."""

    def __init__(self, raw: str, errors: list[str], retries: int) -> None:
        shown = "; ".join(errors[:5]) or "no answer in the output type"
        super().__init__(
            f"The model's answer did not validate after {retries} retr"
            f"{'y' if retries == 1 else 'ies'}: {clipped(shown, 600)}. Raw answer: "
            f"{quoted(raw)}. The thread is persisted and valid; raise Agent(output_retries=...) "
            "or simplify the output type."
        )
        self.raw = raw
        self.errors = errors
        self.retries = retries


class ToolExecutionError(PlaitError):
    """A tool's own code raised. The loop reports it to the model as an error result."""

    def __init__(self, tool: str, error: BaseException) -> None:
        self.tool = tool
        self.error = error
        super().__init__(
            f"Tool {quoted(tool)} failed: {type(error).__name__}: "
            f"{clipped(str(error), _MAX_ERROR_CHARS)}"
        )


class ToolTimeoutError(ToolExecutionError):
    """A tool ran past its timeout and was cancelled; the model reads this as an error result."""

    def __init__(self, tool: str, timeout: float) -> None:
        self.timeout = timeout
        PlaitError.__init__(
            self,
            f"Tool {quoted(tool)} timed out after {timeout:g} s and was cancelled. Try smaller "
            "input, or raise the tool's timeout (@tool(timeout=...) or "
            "Limits(tool_timeout=...)).",
        )
        self.tool = tool
        self.error = TimeoutError(f"timed out after {timeout:g} s")


class TurnAborted(PlaitError):
    """The turn was aborted through :meth:`TurnContext.abort`; ``error`` is the reason."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(f"Turn aborted: {type(error).__name__}: {error}")


class DispatchRejected(PlaitError):
    """A dispatch was rejected through :meth:`DispatchContext.nack`; ``error`` is the reason."""

    def __init__(self, error: BaseException, dispatch_index: int) -> None:
        self.error = error
        self.dispatch_index = dispatch_index
        super().__init__(f"Dispatch {dispatch_index} rejected: {type(error).__name__}: {error}")


class LimitExceeded(TurnAborted):
    """A configured limit ended the turn. ``kind`` names the limit (``"model_calls_per_turn"``,
    ``"tool_calls_total"``, ``"tokens_per_turn"``, …) and ``limit`` its value. The agent's own
    :class:`~plait.runtime.Limits` and :class:`~plait.guards.LimitsMiddleware` both raise it.

    Raised only between dispatches, after the last dispatch's messages were persisted, so the
    thread stays valid: no tool call is left without its result.
    """

    def __init__(self, kind: str, limit: float, message: str) -> None:
        self.kind = kind
        self.limit = limit
        self.error = self
        PlaitError.__init__(self, message)


class StoreError(PlaitError):
    """A thread store could not read or write; the message names the store and what to do.

    Defined here, beside :class:`StoreTimeoutError`; ``plait.stores.StoreError`` is the same
    class."""


class StoreTimeoutError(StoreError):
    """A store call got no answer within its deadline and was abandoned.

    ``operation`` names the call (``"append"``, ``"load"``, ``"lease acquire"``, …),
    ``deadline`` its seconds. Abandoning never waits on the server: the call's statement is sent
    a bounded cancel request and its connection is closed (a frozen server never answers
    either), so the error arrives at the deadline. A transaction abandoned this way rolls
    back, unless its commit had reached the server; a single statement the server had received
    (a lease, an append without images or files) may still take effect if it resumes, whole. The
    next load shows which. The Postgres
    backend and trace store raise their own subclasses, which are also a
    :class:`~plait.backends.base.BackendError` or a ``TraceStoreError``.
    """

    def __init__(
        self,
        operation: str,
        deadline: float,
        where: str,
        *,
        cause: str = "the server is stalled or unreachable: a frozen host, a network partition",
        remedy: str = "timeout=... on the store (or on the PostgresDatabase it shares)",
    ) -> None:
        self.operation = operation
        self.deadline = deadline
        super().__init__(
            f"{where} gave no answer to {operation} within its {deadline:g} s deadline "
            f"({cause}). The call was abandoned and its connection closed. Check that the "
            f"server is up and reachable, or raise the deadline: {remedy}."
        )


class ThreadConflictError(PlaitError):
    """Another writer appended to the thread since this run loaded it (optimistic versioning)."""

    def __init__(self, thread_id: str, expected: int, actual: int) -> None:
        self.thread_id = thread_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Thread {thread_id!r} changed while this run was writing it "
            f"(expected version {expected}, found {actual}). Another run is appending to the "
            "same thread; wait for it to finish and run again."
        )


class ThreadBusyError(PlaitError):
    """A turn is already running on the thread in another worker (its store's lease is held);
    this turn did not start: nothing was loaded, sent to a model or run."""

    def __init__(self, thread_id: str, waited: float, *, settling: bool = False) -> None:
        self.thread_id = thread_id
        self.waited = waited
        if settling:
            # The wait began with a turn this agent abandoned (a stream left with ``break``).
            super().__init__(
                f"Thread {thread_id!r} stayed busy for {waited:g} s, the bound on a new turn's "
                "whole wait (for a turn abandoned on it to settle, then for its lease). Run "
                "again when it is done; close streams with aclose() to settle them in place."
            )
            return
        super().__init__(
            f"Thread {thread_id!r} is running a turn in another worker (waited {waited:g} s). "
            "Run again when it is done, or give the store a longer lease_wait."
        )


class ProviderError(PlaitError):
    """A model provider failed. ``retryable`` says whether trying again may succeed."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        retryable: bool = False,
    ) -> None:
        self.provider = provider
        self.status = status
        self.retryable = retryable
        super().__init__(message)


class ModelResponseError(ProviderError):
    """A model (your own :class:`~plait.models.Model`, or a ``wrap_model_call`` middleware in
    front of it) returned something that is not a valid
    :class:`~plait.models.ModelResponse`, e.g. ``Usage(input_tokens="12")``. ``model`` names
    the model, ``field`` what is wrong (``"usage.input_tokens"``, ``"tool_calls[0].name"``;
    ``""`` when the value is not a ``ModelResponse`` at all). Raised as the runtime receives the
    response, before anything else uses it; not retryable (the same code answers the same way).
    """

    def __init__(self, message: str, *, model: str, field: str) -> None:
        self.model = model
        self.field = field
        super().__init__(message, provider=model)


class ModelTimeoutError(ProviderError):
    """A model call found no complete answer within its overall deadline
    (:class:`~plait.models.ModelTimeouts` ``total``, across every attempt and retry)."""

    def __init__(
        self,
        model: str,
        total: float,
        attempts: int,
        connect: float | None = None,
        read: float | None = None,
        *,
        remedy: str = "timeouts=ModelTimeouts(total=...) on the model, or "
        "$PLAIT_MODEL_TIMEOUT (seconds)",
    ) -> None:
        self.total = total
        tries = "attempt" if attempts == 1 else "attempts"
        detail = f"{attempts} {tries}"
        if connect is not None and read is not None:
            detail += f"; connect timeout {connect:g} s, read timeout {read:g} s"
        super().__init__(
            f"Model {model!r} gave no complete answer within its {total:g} s deadline "
            f"({detail}). Check that the server is up and reachable, or raise the deadline: "
            f"{remedy}.",
            provider=model,
            retryable=True,
        )


class ContextOverflowError(ProviderError):
    """The request is longer than the model's context window."""


class ThreadPaused(PlaitError):
    """The thread's last turn is paused on tool calls that wait for a decision; a new turn
    would leave them unanswered. Resume it, or run with ``on_paused="reject"``."""

    def __init__(self, thread_id: str, call_ids: list[str]) -> None:
        self.thread_id = thread_id
        self.call_ids = call_ids
        super().__init__(
            f"Thread {thread_id!r} is paused: tool call(s) {', '.join(call_ids)} wait for a "
            "decision. Resume it with agent.resume(thread_id, {call_id: Approve() | "
            "Reject(message) | Answer(result)}) (`plait threads resume ID` on the command "
            "line), or run with on_paused='reject' to reject them and start the new turn."
        )


class ThreadNotPaused(PlaitError):
    """``agent.resume`` was called on a thread with nothing pending."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"Thread {thread_id!r} has no paused turn to resume; start a new turn with "
            "agent.run(...) instead."
        )


class DecisionError(PlaitError, ValueError):
    """The decisions given to ``agent.resume`` do not match the pending calls: ``missing``
    names the pending call ids without a decision, ``unknown`` the ids that are not pending."""

    def __init__(self, thread_id: str, missing: list[str], unknown: list[str]) -> None:
        self.thread_id = thread_id
        self.missing = missing
        self.unknown = unknown
        problems = []
        if missing:
            problems.append(f"no decision for pending call(s) {', '.join(missing)}")
        if unknown:
            problems.append(f"call(s) {', '.join(unknown)} are not pending")
        super().__init__(
            f"Cannot resume thread {thread_id!r}: {'; '.join(problems)}. Give exactly one "
            "Approve(), Reject(message) or Answer(result) per pending call id "
            "(RunResult.pending lists them)."
        )


class ResumeConflict(ThreadConflictError):
    """Another resume claimed the paused turn first (or one claimed it and did not finish):
    the pending calls are decided exactly once, so this resume ran nothing."""

    def __init__(self, thread_id: str, expected: int, actual: int, detail: str = "") -> None:
        super().__init__(thread_id, expected, actual)
        self.args = (
            f"Thread {thread_id!r}: another resume claimed its paused turn first{detail}; this "
            "resume ran nothing. Load the thread to see the outcome; if that resume died, run "
            "with on_paused='reject' to reject the calls it held and go on.",
        )

    def __str__(self) -> str:
        return str(self.args[0])
