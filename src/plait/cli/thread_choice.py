"""Which stored thread a command means: ``--thread ID``, ``threads show ID``, ``-c``.

Thread ids are taken as git takes commits: the whole id, or any prefix of at least
:data:`MIN_PREFIX` characters that only one thread's id starts with (letter case ignored; ids are
printed in lowercase, :func:`shown_id`). A prefix two threads share is refused with both listed;
an id no thread has is refused with the text tried. Both are usage errors (exit 2).

``-c/--continue`` continues the most recent thread *started in the current folder*: the first turn
of a thread the CLI starts records the folder in the thread's state (:data:`THREAD_FOLDER_KEY`,
:func:`started_in`). Threads without that record (written before it existed, or by Python code)
count as started anywhere, so they can still be continued with ``-c``; threads started in another
folder are skipped. Only the :data:`MAX_FOLDER_SCAN` most recently written threads are looked at.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plait.errors import ConfigurationError, quoted

__all__ = [
    "MAX_CANDIDATES_SHOWN",
    "MAX_FOLDER_SCAN",
    "MIN_PREFIX",
    "THREAD_FOLDER_KEY",
    "AmbiguousThread",
    "NoThreadToContinue",
    "ThreadChoiceError",
    "UnknownThread",
    "choose_thread",
    "latest_thread_here",
    "match_thread_id",
    "resolve_thread_id",
    "shown_id",
    "started_in",
]

THREAD_FOLDER_KEY = "plait_cli_folder"
"""Thread state the CLI writes on a thread's first turn: the absolute folder it was started in."""

MIN_PREFIX = 4
"""The shortest prefix that may stand for a whole id (as git's abbreviations); a whole id of any
length is always taken."""

MAX_CANDIDATES_SHOWN = 10
"""How many of the threads an ambiguous prefix matches its message lists."""

MAX_FOLDER_SCAN = 500
"""How many of the most recently written threads ``-c`` looks through for one started in the
current folder (each is loaded to read its state)."""

LIST_HINT = "See: plait threads list"


class ThreadChoiceError(ConfigurationError):
    """The thread a command names cannot be told: a usage error (the CLI exits 2)."""


class UnknownThread(ThreadChoiceError):
    """No thread's id is, or starts with, what was given (a typo must not silently start a new
    conversation under that id)."""

    def __init__(self, thread_id: str, hint: str = LIST_HINT) -> None:
        self.thread_id = thread_id
        short = (
            f" (a prefix needs at least {MIN_PREFIX} characters)"
            if 0 < len(thread_id.strip()) < MIN_PREFIX
            else ""
        )
        super().__init__(
            f"No thread {quoted(thread_id)} in the thread store: no id is or starts with it"
            f"{short}. {hint}"
        )


class AmbiguousThread(ThreadChoiceError):
    """A prefix that more than one thread's id starts with; ``candidates`` are those ids."""

    def __init__(self, prefix: str, candidates: Sequence[str]) -> None:
        self.prefix = prefix
        self.candidates = list(candidates)
        listed = ", ".join(shown_id(c) for c in self.candidates[:MAX_CANDIDATES_SHOWN])
        more = len(self.candidates) - MAX_CANDIDATES_SHOWN
        rest = f" and {more} more" if more > 0 else ""
        super().__init__(
            f"The thread id prefix {quoted(prefix)} matches {len(self.candidates)} threads: "
            f"{listed}{rest}. Give more characters of the id."
        )


class NoThreadToContinue(ThreadChoiceError):
    """``-c/--continue`` with no thread to continue (none at all, or none started here)."""

    def __init__(self, folder: Path | None = None, elsewhere: int = 0) -> None:
        self.folder = folder
        if folder is None or not elsewhere:
            message = (
                "There is no conversation to continue yet. Leave out -c/--continue to start one."
            )
        else:
            message = (
                f"No conversation was started in {folder} to continue ({elsewhere} thread"
                f"{'s were' if elsewhere != 1 else ' was'} started in other folders). Leave out "
                "-c/--continue to start one, or continue another with --thread ID (see: plait "
                "threads list)."
            )
        super().__init__(message)


def shown_id(thread_id: str) -> str:
    """A thread id as the CLI prints it: in lowercase, wherever it is printed."""
    return thread_id.lower()


def match_thread_id(ids: Sequence[str], given: str, hint: str = LIST_HINT) -> str:
    """The one id of ``ids`` that ``given`` names: itself, the same id in another letter case,
    or the only id starting with ``given`` (at least :data:`MIN_PREFIX` characters, any case).
    Raises :class:`AmbiguousThread` or :class:`UnknownThread` (whose message ends with
    ``hint``)."""
    if given in ids:
        return given
    wanted = given.strip().lower()
    if not wanted:
        raise UnknownThread(given, hint)
    same = [i for i in ids if i.lower() == wanted]
    if not same and len(wanted) >= MIN_PREFIX:
        same = [i for i in ids if i.lower().startswith(wanted)]
    if len(same) == 1:
        return same[0]
    if same:
        raise AmbiguousThread(given, same)
    raise UnknownThread(given, hint)


async def resolve_thread_id(store: Any, given: str, hint: str = LIST_HINT) -> str:
    """:func:`match_thread_id` over every thread ``store`` (a thread store) holds."""
    return match_thread_id(await store.list_threads(), given, hint)


def started_in(folder: Path | None = None) -> dict[str, str]:
    """The state a new thread's first turn writes: the folder it is started in (default: the
    current one, symlinks resolved)."""
    return {THREAD_FOLDER_KEY: str((folder or Path.cwd()).resolve())}


async def latest_thread_here(store: Any, folder: Path | None = None) -> str:
    """The most recently written thread started in ``folder`` (default: the current one) or
    recording no folder, among the :data:`MAX_FOLDER_SCAN` most recent. Raises
    :class:`NoThreadToContinue` when there is none."""
    here = started_in(folder)[THREAD_FOLDER_KEY]
    ids = await store.list_threads()
    elsewhere = 0
    for thread_id in ids[:MAX_FOLDER_SCAN]:
        recorded = (await store.load(thread_id)).state.get(THREAD_FOLDER_KEY)
        if not isinstance(recorded, str) or recorded == here:
            return str(thread_id)
        elsewhere += 1
    raise NoThreadToContinue(Path(here), elsewhere)


async def choose_thread(store: Any, thread: str | None, latest: bool) -> str | None:
    """The thread ``run``/``chat`` continue: the one ``thread`` names (a whole id or a unique
    prefix, see :func:`match_thread_id`), the latest one started here when ``latest``
    (:func:`latest_thread_here`), else ``None`` (a new thread)."""
    if thread is not None:
        return await resolve_thread_id(
            store, thread, "Leave out --thread to start a new conversation; see: plait threads list"
        )
    if latest:
        return await latest_thread_here(store)
    return None
