"""``History`` / ``HistoryView``: O(1) request snapshots that no later change shows through."""

from __future__ import annotations

import copy
import gc
import pickle
from collections.abc import Callable

import pytest

from plait import Agent, DispatchContext, Middleware, ModelRequest, ModelResponse
from plait.history import History, HistoryView, request_messages
from plait.messages import Message, UserMessage
from plait.models.scripted import ScriptedModel
from plait.runtime.events import ModelRequestSent

A, B, C, D = (UserMessage(text, id=text) for text in "abcd")
X = UserMessage("x", id="x")


def test_a_view_is_the_history_as_it_was_and_appends_do_not_show() -> None:
    history = History([A, B])
    view = history.view()
    history.append(C)
    history.extend([D])
    history += [X]
    assert list(view) == [A, B]
    assert len(view) == 2
    assert view[-1] is B
    assert list(history.view()) == [A, B, C, D, X]


def test_a_view_ends_with_its_tail_copied_when_it_was_taken() -> None:
    history = History([A])
    tail = [B]
    view = history.view(tail)
    tail.append(C)
    history.append(D)
    assert list(view) == [A, B]
    assert (view[0], view[1], view[-1], view[-2]) == (A, B, B, A)
    assert view[0:2] == [A, B] and view[1:] == [B] and view[::-1] == [B, A]
    assert list(reversed(view)) == [B, A]
    assert B in view and view.index(B) == 1 and view.count(A) == 1
    with pytest.raises(IndexError):
        view[2]
    with pytest.raises(IndexError):
        view[-3]


EDITS: dict[str, Callable[[History], object]] = {
    "setitem": lambda h: h.__setitem__(0, X),
    "slice assignment": lambda h: h.__setitem__(slice(0, 2), [X]),
    "delitem": lambda h: h.__delitem__(0),
    "insert": lambda h: h.insert(0, X),
    "pop": lambda h: h.pop(),
    "remove": lambda h: h.remove(A),
    "clear": lambda h: h.clear(),
    "sort": lambda h: h.sort(key=lambda m: m.id, reverse=True),
    "reverse": lambda h: h.reverse(),
    "imul": lambda h: h.__imul__(0),
    "init again": lambda h: h.__init__([X]),  # type: ignore[misc]
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_a_change_in_place_never_shows_through_earlier_views(edit: str) -> None:
    history = History([A, B, C])
    first = history.view()
    history.append(D)
    second = history.view([X])
    EDITS[edit](history)
    assert list(first) == [A, B, C]
    assert list(second) == [A, B, C, D, X]
    assert second[3] is D and list(reversed(first)) == [C, B, A]
    assert list(history.view()) == list(history)  # a new view sees the change


def test_a_reverse_scan_stays_on_the_snapshot_when_the_history_changes_midway() -> None:
    history = History([A, B, C])
    view = history.view()
    seen: list[Message] = []
    for message in reversed(view):
        seen.append(message)
        history[0] = X
    assert seen == [C, B, A]


def test_views_compare_equal_to_any_sequence_of_the_same_messages() -> None:
    history = History([A, B])
    view = history.view()
    assert view == [A, B] and view == (A, B) and view == history.view()
    assert [A, B] == view  # noqa: SIM300 (the list's side: Python falls back to the view's __eq__)
    assert view != [A] and view != [B, A] and view != "ab"
    assert repr(view).startswith("HistoryView([")


def test_a_copied_history_has_its_own_views() -> None:
    history = History([A])
    view = history.view()
    for copied in (copy.copy(history), copy.deepcopy(history), pickle.loads(pickle.dumps(history))):
        assert type(copied) is History and [m.id for m in copied] == ["a"]
        copied.append(B)
        later = copied.view()
        history[0] = X
        copied[0] = C
        assert [m.id for m in later] == ["a", "b"]
        assert list(view) == [A]
        history[0] = A


def test_a_copied_or_pickled_view_keeps_the_snapshot_when_the_history_changes() -> None:
    history = History([A, B])
    view = history.view([C])
    history.append(D)
    copies = (copy.copy(view), copy.deepcopy(view), pickle.loads(pickle.dumps(view)))
    history[0] = X
    del history[1]
    for copied in copies:
        assert [m.id for m in copied] == ["a", "b", "c"]
        assert len(copied) == 3 and copied[-1].id == "c"


def test_a_plain_list_is_copied_not_viewed() -> None:
    plain: list[Message] = [A]
    messages = request_messages(plain, [B])
    plain.append(C)
    assert type(messages) is list and messages == [A, B]
    assert isinstance(request_messages(History([A]), ()), HistoryView)


class RewritesHistory(Middleware):
    """Replaces the first message of the turn's history in place after the first model call,
    as a projection-stripping middleware does."""

    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        ctx.turn.messages[0] = UserMessage("rewritten")
        return response


async def test_requests_an_agent_sent_stay_as_sent_when_middleware_edits_the_history() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model, middleware=[RewritesHistory()])
    first = await agent.run("hello", thread_id="t")
    await agent.run("again", thread_id="t")
    sent = [e.request for e in first.events if isinstance(e, ModelRequestSent)]
    assert isinstance(sent[0].messages, HistoryView)
    assert [m.text for m in sent[0].messages] == ["hello"]
    assert [m.text for m in model.requests[1].messages] == ["hello", "one", "again"]


def test_a_history_and_its_views_are_freed_without_the_garbage_collector() -> None:
    gc.collect()
    gc.disable()
    try:
        history = History([UserMessage(f"m{i}") for i in range(50)])
        views = [history.view(), history.view([X])]
        history.append(A)
        assert len(views[0]) == 50 and len(views[1]) == 51
        del history, views
        assert gc.collect() == 0  # nothing was left in a reference cycle
    finally:
        gc.enable()


def test_a_view_outliving_its_history_still_reads_and_a_dead_view_is_skipped() -> None:
    history = History([A, B])
    kept = history.view()
    history.view()  # dropped at once: its weak reference is dead when the history changes
    history.insert(0, C)
    assert list(kept) == [A, B]
    del history
    assert list(kept) == [A, B] and kept[1] is B
