"""The Postgres server the tests use: ``PLAIT_TEST_POSTGRES_URL`` (``.ci/postgres.sh start``),
its PgBouncer, and its data folder ``PLAIT_TEST_POSTGRES_DIR`` (for tests that restart it); and
:func:`throwaway_cluster`, a server of a test's own to freeze.

Without a variable, tests that need the server skip with the reason; under ``CI=true`` they
fail instead, so CI can never pass without running them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest

URL_VARIABLE = "PLAIT_TEST_POSTGRES_URL"
PGBOUNCER_VARIABLE = "PLAIT_TEST_PGBOUNCER_URL"
DIR_VARIABLE = "PLAIT_TEST_POSTGRES_DIR"
_SCRIPT = Path(__file__).parents[2] / ".ci" / "postgres.sh"


def _required(variable: str, what: str) -> str:
    value = os.environ.get(variable)
    if value:
        return value
    reason = f'{what}: set {variable} (eval "$(.ci/postgres.sh start)" starts one)'
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {variable} is not set; {reason}")
    pytest.skip(reason)


def postgres_url() -> str:
    """The test server's URL, or skip (fail under CI) with the reason."""
    return _required(URL_VARIABLE, "needs a Postgres server")


def postgres_dir() -> str:
    """The test server's data folder (to stop and restart it), or skip (fail under CI)."""
    return _required(DIR_VARIABLE, "needs the Postgres data folder to restart the server")


def pgbouncer_url() -> str:
    """A transaction-mode PgBouncer in front of the test server, or skip (fail under CI)."""
    return _required(PGBOUNCER_VARIABLE, "needs PgBouncer in transaction mode")


@asynccontextmanager
async def fresh_schema(url: str | None = None) -> AsyncIterator[str]:
    """A new empty schema name, dropped (with everything in it) afterwards."""
    import psycopg

    target = url or postgres_url()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    try:
        yield schema
    finally:
        async with await psycopg.AsyncConnection.connect(target, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class ThrowawayCluster:
    """A Postgres cluster (and its PgBouncer) of its own, started with ``.ci/postgres.sh`` in a
    fresh folder, for tests that freeze the server (``SIGSTOP``: what a frozen host or a network
    partition looks like to a client). Never the shared test server: other tests use that one.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.url = ""
        self.pgbouncer_url = ""
        self._frozen: list[int] = []

    def start(self) -> ThrowawayCluster:
        out = subprocess.run(
            [str(_SCRIPT), "start", str(self.directory)],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        exports = dict(
            line.removeprefix("export ").split("=", 1)
            for line in out.splitlines()
            if line.startswith("export ")
        )
        self.url = exports[URL_VARIABLE]
        self.pgbouncer_url = exports.get(PGBOUNCER_VARIABLE, "")
        return self

    def stop(self) -> None:
        self.thaw()
        subprocess.run([str(_SCRIPT), "stop", str(self.directory)], check=False, timeout=120)

    def processes(self) -> list[int]:
        """The postmaster and every process it started (backends, background workers), read
        from the postmaster's own ``children`` list: scanning every ``/proc/*/stat`` can block
        on a process elsewhere on the machine."""
        postmaster = int((self.directory / "data" / "postmaster.pid").read_text().split()[0])
        children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
        return [postmaster, *map(int, children)]

    def freeze(self) -> None:
        """``SIGSTOP`` the postmaster first (so it starts no new backend), then its children."""
        self._frozen = self.processes()
        for pid in self._frozen:
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in reversed(self._frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._frozen = []

    @contextmanager
    def frozen(self) -> Iterator[None]:
        self.freeze()
        try:
            yield
        finally:
            self.thaw()


@contextmanager
def throwaway_cluster() -> Iterator[ThrowawayCluster]:
    """A started :class:`ThrowawayCluster`, stopped and removed afterwards; needs Debian's
    postgresql (skips, or fails under ``CI=true``, without it)."""
    if shutil.which("pg_ctl") is None and not list(Path("/usr/lib/postgresql").glob("*/bin")):
        reason = "needs PostgreSQL installed to start a throwaway cluster"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    cluster = ThrowawayCluster(Path(tempfile.mkdtemp(prefix="plait-frozen-")))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


async def terminate_other_backends(url: str) -> int:
    """Kill every other client connection to ``url``'s database (what a restart or an
    administrator's ``pg_terminate_backend`` does to a pool); how many. Only on a
    :class:`ThrowawayCluster`: the shared server's other users would lose theirs."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND datname = current_database() "
            "AND backend_type = 'client backend'"
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0
