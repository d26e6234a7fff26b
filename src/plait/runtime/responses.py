"""What the runtime accepts from a model: a :class:`~plait.models.ModelResponse` whose fields
have the types they are declared with, checked as the response arrives.

A provider adapter builds its responses itself; a user's own :class:`~plait.models.Model` (or a
``wrap_model_call`` middleware) may not, and a wrong type would surface later as an untyped
``TypeError`` far from its cause (``Usage(input_tokens="12")`` when the turn adds up usage).
:func:`checked_response` raises :class:`~plait.errors.ModelResponseError` naming the field and
the model instead.

=====================  ============================================================
field                  accepted
=====================  ============================================================
``content``            ``str``
``tool_calls``         a ``list`` of ``ToolCall`` (``id``, ``name``: ``str``; ``args``:
                       ``dict``; ``raw_args``: ``str`` or ``None``)
``finish_reason``      ``str`` or ``None``
``usage``              a ``Usage`` whose six counts are ``int`` (not ``bool``) ``>= 0``
``model``              ``str`` or ``None``
``metadata``           ``dict``
=====================  ============================================================

Every response pays the check once per dispatch (twice with ``wrap_model_call`` middleware:
the model's answer before any of them sees it, then the chain's), so the common case is decided
inline with exact-type tests (about 0.5 µs); only a response that fails them (a subclass, or a
real fault) takes the slow path that finds the field at fault.
"""

from __future__ import annotations

from plait.errors import ModelResponseError, clipped
from plait.messages import ToolCall, Usage, new_id
from plait.middleware.base import ModelHandler
from plait.middleware.context import TurnContext
from plait.models.base import ModelRequest, ModelResponse
from plait.models.fallback import FallbackNotice, fallback_listener
from plait.models.retrying import RetryNotice, retry_listener
from plait.runtime.events import ModelCallRerouted, ModelCallRetried

__all__ = ["checked_response", "checking", "report_retries", "with_unique_call_ids"]

_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "requests",
    "reasoning_tokens",
    "cache_write_1h_tokens",
)


def checked_response(response: object, model: object, *, wrapped: bool = False) -> ModelResponse:
    """``response`` itself if it is a valid :class:`ModelResponse` (see the module table), else
    :class:`~plait.errors.ModelResponseError` naming ``model`` and the first field at fault.

    ``wrapped`` says the response came through ``wrap_model_call`` middleware, which the
    message then names as a possible culprit."""
    if type(response) is ModelResponse and type(u := response.usage) is Usage:
        a, b, c = u.input_tokens, u.output_tokens, u.cache_read_tokens
        d, e, f = u.cache_write_tokens, u.requests, u.reasoning_tokens
        g = u.cache_write_1h_tokens
        reason, name = response.finish_reason, response.model
        if (
            type(a) is int
            and type(b) is int
            and type(c) is int
            and type(d) is int
            and type(e) is int
            and type(f) is int
            and type(g) is int
            and a >= 0
            and b >= 0
            and c >= 0
            and d >= 0
            and e >= 0
            and f >= 0
            and g >= 0
            and type(response.content) is str
            and type(response.tool_calls) is list
            and (type(reason) is str or reason is None)
            and (name is None or type(name) is str)
            and type(response.metadata) is dict
        ):
            for call in response.tool_calls:
                if not (
                    type(call) is ToolCall
                    and type(call.id) is str
                    and type(call.name) is str
                    and type(call.args) is dict
                    and (call.raw_args is None or type(call.raw_args) is str)
                ):
                    break
            else:
                return response
    fault = _fault(response)
    if fault is None:  # subclasses of the declared types, all in order
        assert isinstance(response, ModelResponse)
        return response
    field, problem = fault
    model_name = str(getattr(model, "name", None) or type(model).__name__)
    where = (
        "its generate()/stream() and every wrap_model_call middleware"
        if wrapped
        else "its generate()/stream()"
    )
    if not field:
        what = f"{type(response).__name__} instead of a ModelResponse"
    else:
        what = f"a ModelResponse whose {field} {problem}"
    raise ModelResponseError(
        f"Model {model_name!r} returned {what}; check {where}.", model=model_name, field=field
    )


def checking(handler: ModelHandler, model: object) -> ModelHandler:
    """``handler`` with its responses passed through :func:`checked_response` (the innermost
    handler, under ``wrap_model_call`` middleware: they never see a malformed response)."""

    async def checked(request: ModelRequest) -> ModelResponse:
        return checked_response(await handler(request), model)

    return checked


def _shown(value: object) -> str:
    return f"{clipped(repr(value), 60)} (a {type(value).__name__})"


def _fault(response: object) -> tuple[str, str] | None:
    """The first field of ``response`` at fault and what is wrong with it; ``None`` if none."""
    if not isinstance(response, ModelResponse):
        return "", ""
    if not isinstance(response.content, str):
        return "content", f"is {_shown(response.content)}, not a str"
    calls = response.tool_calls
    if not isinstance(calls, list):
        return "tool_calls", f"is {_shown(calls)}, not a list of ToolCall"
    for i, call in enumerate(calls):
        at = f"tool_calls[{i}]"
        if not isinstance(call, ToolCall):
            return at, f"is {_shown(call)}, not a ToolCall (tool_calls are not ToolCall objects)"
        for part, kind in (("id", str), ("name", str), ("args", dict)):
            value = getattr(call, part)
            if not isinstance(value, kind):
                return f"{at}.{part}", f"is {_shown(value)}, not a {kind.__name__}"
        if call.raw_args is not None and not isinstance(call.raw_args, str):
            return f"{at}.raw_args", f"is {_shown(call.raw_args)}, not a str or None"
    reason = response.finish_reason
    if reason is not None and not isinstance(reason, str):
        return "finish_reason", f"is {_shown(reason)}, not a str"
    usage = response.usage
    if not isinstance(usage, Usage):
        return "usage", f"is {_shown(usage)}, not a Usage"
    for count in _COUNTS:
        value = getattr(usage, count)
        if not isinstance(value, int) or isinstance(value, bool):
            return f"usage.{count}", f"is {_shown(value)}, not an int >= 0 (a token count)"
        if value < 0:
            return f"usage.{count}", f"is {value}, not an int >= 0 (a token count)"
    if response.model is not None and not isinstance(response.model, str):
        return "model", f"is {_shown(response.model)}, not a str or None"
    if not isinstance(response.metadata, dict):
        return "metadata", f"is {_shown(response.metadata)}, not a dict"
    return None


def with_unique_call_ids(response: ModelResponse) -> ModelResponse:
    """Give every tool call of ``response`` a non-empty id unique within it.

    Some OpenAI-compatible servers send empty or repeated ids; results are paired with calls by
    id, so such calls get a fresh ``call_<hex>`` id before anything runs or is persisted.
    """
    calls = response.tool_calls
    if len(calls) < 2 and (not calls or calls[0].id):
        return response  # the common case, decided without a set
    seen: set[str] = set()
    fixed = None
    for i, call in enumerate(calls):
        if not call.id or call.id in seen:
            fixed = fixed if fixed is not None else list(calls)
            fixed[i] = ToolCall(f"call_{new_id()[:24]}", call.name, call.args, call.raw_args)
        seen.add(fixed[i].id if fixed is not None else call.id)
    return response if fixed is None else response.replace(tool_calls=fixed)


def report_retries(ctx: TurnContext) -> None:
    """Every provider retry of a model call made during the turn becomes a ``ModelCallRetried``
    sent through ``ctx.emit`` (so middleware that tees the events sees it); the listener is
    removed when the turn ends (a finalizer registered first, so it runs last)."""

    def heard(notice: RetryNotice) -> None:
        ctx.emit(
            ModelCallRetried(
                dispatch=ctx.dispatch_count - 1,
                error=notice.error,
                delay=notice.delay,
                retry=notice.retry,
                max_retries=notice.max_retries,
            )
        )

    def fell_back(n: FallbackNotice) -> None:  # a FallbackModel's, the same way
        ctx.emit(
            ModelCallRerouted(
                dispatch=ctx.dispatch_count - 1,
                failed=n.failed,
                next=n.next,
                error=n.error,
                dropped_reasoning=n.dropped,
            )
        )

    retried, fell = retry_listener.set(heard), fallback_listener.set(fell_back)

    def reset(_error: BaseException | None) -> None:
        retry_listener.reset(retried)
        fallback_listener.reset(fell)

    ctx.finalizers.append(reset)
