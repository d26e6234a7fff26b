"""Deadlines on the Postgres backend: with the server frozen (``SIGSTOP`` on a throwaway cluster
of this module's own), each call raises ``BackendTimeoutError`` (a ``BackendError``, which
eviction and the skill sources catch, and a ``StoreTimeoutError``) at its deadline; once the
server is back the blobs written before are intact and writes work again. The figures are in
``bench/postgres_stall.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest
from postgres_server import ThrowawayCluster, fresh_schema, throwaway_cluster

from plait.backends.base import BackendError, BackendTimeoutError
from plait.backends.postgres import PostgresBackend
from plait.errors import StoreTimeoutError

DEADLINE = 1.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThrowawayCluster]:
    with throwaway_cluster() as started:
        yield started


async def _until_usable(backend: PostgresBackend) -> None:
    """Poll until a call succeeds: the pool reconnects in the background after a freeze."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 60
    while True:
        try:
            await backend.exists("warm-up")
            return
        except BackendError:
            if loop.time() > give_up:
                raise
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("via", ["direct", "pgbouncer"])
async def test_every_backend_call_on_a_frozen_server_raises_the_typed_error(
    cluster: ThrowawayCluster, via: str
) -> None:
    url = cluster.url if via == "direct" else cluster.pgbouncer_url
    assert url, "the throwaway cluster has no PgBouncer (install pgbouncer)"
    prepared = via == "direct"
    async with fresh_schema(cluster.url) as schema:
        safe = PostgresBackend(url, schema=schema, prepared_statements=prepared)
        await safe.setup()
        await safe.write("results/kept.txt", "before the freeze")
        hasty = PostgresBackend(url, schema=schema, prepared_statements=prepared, timeout=DEADLINE)
        await _until_usable(hasty)
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "backend write": lambda: hasty.write("results/lost.txt", "during the freeze"),
            "backend read": lambda: hasty.read("results/kept.txt"),
            "backend ls": lambda: hasty.ls("results"),
        }
        errors: dict[str, BackendTimeoutError] = {}
        with cluster.frozen():
            for name, call in calls.items():
                async with asyncio.timeout(60):  # turns a hang into a failure; not a timing check
                    with pytest.raises(BackendTimeoutError) as caught:
                        await call()
                errors[name] = caught.value
        for name, error in errors.items():
            assert isinstance(error, BackendError) and isinstance(error, StoreTimeoutError)
            assert (error.operation, error.deadline) == (name, DEADLINE)
            assert "timeout=" in str(error)

        await _until_usable(safe)
        assert await safe.read("results/kept.txt") == "before the freeze"
        await _until_usable(hasty)
        await hasty.write("results/after.txt", "after the freeze")
        assert await safe.read("results/after.txt") == "after the freeze"
        await hasty.aclose()
        await safe.aclose()
