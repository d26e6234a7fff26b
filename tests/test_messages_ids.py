"""``new_id``: 32 hex characters, unique across threads, processes and forked children."""

from __future__ import annotations

import multiprocessing
import re
import threading

from plait.messages import ToolMessage, UserMessage, new_id

PER_WORKER = 20_000


def ids_in_child(count: int) -> list[str]:
    return [new_id() for _ in range(count)]


def test_ids_are_32_lowercase_hex_characters() -> None:
    assert all(re.fullmatch(r"[0-9a-f]{32}", new_id()) for _ in range(1000))


def test_messages_get_distinct_ids_unless_given_one() -> None:
    assert UserMessage("a").id != UserMessage("a").id
    assert ToolMessage("c", "t", id="mine").id == "mine"


def test_ids_from_many_threads_never_repeat() -> None:
    results: list[list[str]] = [[] for _ in range(8)]

    def work(slot: list[str]) -> None:
        slot.extend(new_id() for _ in range(PER_WORKER))

    threads = [threading.Thread(target=work, args=(slot,)) for slot in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for slot in results for i in slot]
    assert len(every) == len(set(every)) == 8 * PER_WORKER


def test_ids_from_forked_and_spawned_processes_never_repeat() -> None:
    # Forked children start from the parent's memory: ids must not depend on in-process state.
    parent = [new_id() for _ in range(PER_WORKER)]
    every = list(parent)
    for method in ("fork", "spawn"):
        with multiprocessing.get_context(method).Pool(3) as pool:
            for batch in pool.map(ids_in_child, [PER_WORKER] * 3):
                every.extend(batch)
    assert len(every) == len(set(every)) == 7 * PER_WORKER
