"""The Postgres server the tests use: ``PLAIT_TEST_POSTGRES_URL`` (``.ci/postgres.sh start``),
its PgBouncer, and its data folder ``PLAIT_TEST_POSTGRES_DIR`` (for tests that restart it).

Without a variable, tests that need the server skip with the reason; under ``CI=true`` they
fail instead, so CI can never pass without running them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

URL_VARIABLE = "PLAIT_TEST_POSTGRES_URL"
PGBOUNCER_VARIABLE = "PLAIT_TEST_PGBOUNCER_URL"
DIR_VARIABLE = "PLAIT_TEST_POSTGRES_DIR"


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
