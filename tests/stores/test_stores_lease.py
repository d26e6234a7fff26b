"""``held_lease`` itself: the polling, renewal and release every table lease shares."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from plait.errors import ConfigurationError, ThreadBusyError
from plait.stores.lease import LEASE_RELEASE_S, held_lease, thread_lease


class Table:
    """A lease table in a dict, recording what the lease machinery asked of it."""

    def __init__(self) -> None:
        self.owner: str | None = None
        self.calls: list[str] = []
        self.renewed = asyncio.Event()

    async def acquire(self, thread: str, owner: str) -> bool:
        self.calls.append("acquire")
        if self.owner is not None:
            return False
        self.owner = owner
        return True

    async def renew(self, thread: str, owner: str) -> bool:
        self.calls.append("renew")
        self.renewed.set()
        return self.owner == owner

    async def release(self, thread: str, owner: str, within: float) -> None:
        self.calls.append("release")
        assert 0 < within <= LEASE_RELEASE_S
        if self.owner == owner:
            self.owner = None


async def test_the_lease_is_renewed_while_held_and_released_after() -> None:
    table = Table()
    async with held_lease(
        "t", acquire=table.acquire, renew=table.renew, release=table.release, wait=0, ttl=0.3
    ):
        await table.renewed.wait()
    assert table.owner is None
    assert table.calls[0] == "acquire"
    assert table.calls[-1] == "release"


async def test_a_busy_lease_fails_after_polling_for_the_wait() -> None:
    table = Table()
    table.owner = "someone else"
    with pytest.raises(ThreadBusyError) as caught:
        async with held_lease(
            "t", acquire=table.acquire, renew=table.renew, release=table.release, wait=0.1, ttl=1
        ):
            pass
    assert caught.value.thread_id == "t"
    assert table.calls.count("acquire") > 1
    assert "release" not in table.calls


async def test_a_renewal_that_turns_its_cancellation_into_an_error_does_not_hold_the_turn() -> None:
    table = Table()
    renewing = asyncio.Event()

    async def renew(thread: str, owner: str) -> bool:
        renewing.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("the driver reported the cancellation as its own error") from None
        return True

    async with held_lease(
        "t", acquire=table.acquire, renew=renew, release=table.release, wait=0, ttl=0.3
    ):
        await renewing.wait()
    assert table.owner is None


async def test_renewals_stop_when_the_turn_ends_even_if_a_renewal_swallowed_the_cancel() -> None:
    """A store that retries a renewal whose connection broke (the server restarting) can absorb
    the cancellation and return normally; if the release then fails too, a renewal loop that
    kept going would hold the thread's lease for ever (every later turn: ThreadBusyError)."""
    table = Table()
    in_renewal = asyncio.Event()
    renewals_after_exit: list[float] = []
    exited = False

    async def renew(thread: str, owner: str) -> bool:
        if exited:
            renewals_after_exit.append(asyncio.get_running_loop().time())
        in_renewal.set()
        # The driver's retry on a fresh connection absorbs the cancel: the renewal succeeds.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        return True

    async def release(thread: str, owner: str, within: float) -> None:
        raise RuntimeError("the server is still restarting")

    async with held_lease(
        "t", acquire=table.acquire, renew=renew, release=release, wait=0, ttl=0.06
    ):
        await in_renewal.wait()
        exited = True
    await asyncio.sleep(0.2)  # ten renewal periods
    assert renewals_after_exit == []


@pytest.mark.parametrize("where", ["stopping renewals", "releasing"])
async def test_a_turn_cancelled_while_its_lease_ends_still_releases_it(where: str) -> None:
    """A stream left with ``break`` right after its last event cancels the turn while its
    ``held_lease`` exit is waiting: the release must still run (else a table lease is held
    until it expires, 30 s), and the cancellation must still be raised."""
    table = Table()
    renewing, ending, go_on = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def renew(thread: str, owner: str) -> bool:
        renewing.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if where == "stopping renewals":
                ending.set()  # the lease's end now waits for this renewal to stop
                await go_on.wait()
            raise
        return True

    async def release(thread: str, owner: str, within: float) -> None:
        if where == "releasing":
            ending.set()
            await go_on.wait()
        await table.release(thread, owner, within)

    async def turn() -> None:
        async with held_lease(
            "t", acquire=table.acquire, renew=renew, release=release, wait=0, ttl=0.3
        ):
            await renewing.wait()

    task = asyncio.ensure_future(turn())
    async with asyncio.timeout(LEASE_RELEASE_S):
        await ending.wait()
    task.cancel()
    await asyncio.sleep(0)  # the cancellation lands
    task.cancel()  # and a second one, in case the first was absorbed
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert table.owner is None
    assert table.calls[-1] == "release"


async def test_a_store_without_lease_gets_a_no_op() -> None:
    async with thread_lease(object(), "t") as held:
        assert held is None


@pytest.mark.parametrize(("wait", "ttl"), [(-1, 30), (0, 0.1)])
def test_bad_lease_options_are_refused(wait: float, ttl: float) -> None:
    from plait.stores.memory import MemoryThreadStore
    from plait.stores.sqlite import SQLiteThreadStore

    with pytest.raises(ConfigurationError, match="lease_"):
        SQLiteThreadStore(":memory:", lease_wait=wait, lease_ttl=ttl)
    if ttl >= 0.3:
        with pytest.raises(ConfigurationError, match="lease_wait"):
            MemoryThreadStore(lease_wait=wait)


async def test_local_leases_hand_over_in_arrival_order_and_skip_waiters_that_gave_up() -> None:
    from plait.stores.lease import LocalLeases

    leases = LocalLeases(wait=5)
    order: list[str] = []
    holder_in = asyncio.Event()
    release_holder = asyncio.Event()

    async def holder() -> None:
        async with leases.lease("t"):
            holder_in.set()
            await release_holder.wait()
            order.append("holder")

    async def waiter(name: str) -> None:
        async with leases.lease("t"):
            order.append(name)

    first = asyncio.create_task(holder())
    await holder_in.wait()
    quitter = asyncio.create_task(waiter("quitter"))
    second = asyncio.create_task(waiter("second"))
    third = asyncio.create_task(waiter("third"))
    await asyncio.sleep(0)
    quitter.cancel()
    await asyncio.sleep(0)
    release_holder.set()
    await asyncio.gather(first, second, third)
    assert quitter.cancelled()
    assert order == ["holder", "second", "third"]
    async with LocalLeases(wait=0).lease("t"):
        pass  # every lease was released: a fresh table is free, and so is this one
    async with leases.lease("t"):
        pass
