"""A turn's conversation as a list whose snapshots cost O(1): what model requests carry.

Every model call sends the whole history. Copying it into each request made a turn's cost grow
with the thread (about 8 µs a model call at 2,000 messages); a request must still never change
after it was built (events keep each one), whatever middleware later does to the history.

:class:`History` is the list the runtime keeps in ``TurnContext.messages``; it is a ``list``
(every list operation works, appends at C speed). :meth:`History.view` returns a
:class:`HistoryView`: the first ``len(history)`` messages as they are now, plus a tuple of
extra messages after them (the turn's ephemeral projections), without copying. Appending to the
history leaves earlier views as they were (they know their length). Any other change in place
(``history[i] = m``, ``del``, ``insert``, ``pop``, ``remove``, ``clear``, ``sort``,
``reverse``, slice assignment, ``*=``, ``__init__`` called again) first hands every
outstanding view one shared copy of the messages as they were, so the change never shows
through a view. (C code that writes a list's items directly, such as ``heapq`` on a
history, bypasses this; plait does not do that.) Replacing the whole list
(``ctx.messages = [...]``) is fine too: the runtime then copies, as before. A copy of a history
(``copy.copy``, ``deepcopy``, pickling) is a new ``History`` with no views.

A history holds its views weakly: a view refers to its history, and a strong reference back
made every turn's history, and every message of the thread through it, a reference cycle that
only the garbage collector could free (~60 objects a turn on a 7-message thread, ~1,500 on a
200-message one, all promoted into the collections every request in flight waits out). Freed
by reference counting, they go as soon as the turn's requests and events do.

A view is a read-only ``Sequence``: ``len``, indexing (slices give a new ``list``), iteration
(over a copy taken when iteration starts), ``reversed`` (lazy, for scans from the end that stop
early), ``in``, ``index``, ``count``, and ``==`` with any sequence of the same messages (a
``list`` included). ``copy.copy`` of a view is the view itself; ``deepcopy`` and pickling give
a view of the messages it shows (the tail included). Middleware that wants a different request
builds a new sequence (``request.replace(messages=[...])``), as it did with lists. Views are
shallow: the messages are the turn's own objects, as they were in the copied lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from copy import deepcopy
from typing import Any, SupportsIndex, overload
from weakref import ref

from plait.messages import Message

__all__ = ["History", "HistoryView"]


class HistoryView(Sequence[Message]):
    """The history's first ``length`` messages, then ``tail``; see the module docstring."""

    __slots__ = ("__weakref__", "_items", "_length", "_tail")

    def __init__(self, items: list[Message], length: int, tail: tuple[Message, ...] = ()) -> None:
        self._items = items
        self._length = length
        self._tail = tail

    def __len__(self) -> int:
        return self._length + len(self._tail)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1 and stop <= self._length:
                return self._items[start:stop]
            return self._copy()[index]
        i = index.__index__()
        length = self._length
        if i < 0:
            i += length + len(self._tail)
        if 0 <= i < length:
            return self._items[i]
        if length <= i < length + len(self._tail):
            return self._tail[i - length]
        raise IndexError("message index out of range")

    def _copy(self) -> list[Message]:
        copy = self._items[: self._length]
        copy.extend(self._tail)
        return copy

    def __iter__(self) -> Iterator[Message]:
        return iter(self._copy())

    def __reversed__(self) -> Iterator[Message]:
        yield from reversed(self._tail)
        # self._items is read at every step: if the history is changed meanwhile, the view has
        # been handed the copy of what it held, so the scan goes on over the same messages.
        for i in range(self._length - 1, -1, -1):
            yield self._items[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HistoryView | list | tuple):
            return len(self) == len(other) and self._copy() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> HistoryView:
        # The history detaches this view (not a slot-for-slot copy of it) before a change in
        # place, so a copy must be this very view to stay what it was.
        return self

    def __reduce__(self) -> tuple[type[HistoryView], tuple[list[Message], int]]:
        # Pickled (and deep-copied) as the messages it shows, not as the live history.
        items = self._copy()
        return HistoryView, (items, len(items))

    def __repr__(self) -> str:
        return f"HistoryView({self._copy()!r})"


class History(list[Message]):
    """The turn's messages: a ``list`` that hands out O(1) snapshots (:meth:`view`)."""

    __slots__ = ("_views",)

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        if hasattr(self, "_views"):  # ``__init__`` called again: it replaces the contents
            self._detach()
        super().__init__(messages)
        self._views: list[ref[HistoryView]] = []

    def view(self, tail: Iterable[Message] = ()) -> HistoryView:
        """The messages as they are now, then ``tail`` (copied into a tuple), unaffected by
        later changes to this history."""
        view = HistoryView(self, len(self), tuple(tail) if tail else ())
        self._views.append(ref(view))
        return view

    def __copy__(self) -> History:
        return History(self)  # a new history: the views stay with this one

    def __deepcopy__(self, memo: dict[int, Any]) -> History:
        return History(deepcopy(list(self), memo))

    def __reduce__(self) -> tuple[type[History], tuple[list[Message]]]:
        return History, (list(self),)

    def _detach(self) -> None:
        """Before a change in place: every view so far gets one copy of the messages as they
        are (each view is a prefix of them), and stops reading this list."""
        if self._views:
            frozen = list(self)
            for view_ref in self._views:
                view = view_ref()
                if view is not None:
                    view._items = frozen
            self._views = []

    def __setitem__(self, index: Any, value: Any) -> None:
        self._detach()
        super().__setitem__(index, value)

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        self._detach()
        super().__delitem__(index)

    def __imul__(self, count: SupportsIndex) -> History:
        self._detach()
        return super().__imul__(count)

    def insert(self, index: SupportsIndex, message: Message) -> None:
        self._detach()
        super().insert(index, message)

    def pop(self, index: SupportsIndex = -1) -> Message:
        self._detach()
        return super().pop(index)

    def remove(self, message: Message) -> None:
        self._detach()
        super().remove(message)

    def clear(self) -> None:
        self._detach()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._detach()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._detach()
        super().reverse()


def request_messages(messages: Sequence[Message], tail: Sequence[Message]) -> Sequence[Message]:
    """What a request carries: a view of ``messages`` if it is a :class:`History`, else a new
    list (someone replaced ``TurnContext.messages`` with a plain list), then ``tail``."""
    if type(messages) is History:
        return messages.view(tail)
    return [*messages, *tail]
