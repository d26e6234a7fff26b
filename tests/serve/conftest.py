"""Fixtures: one ``plait serve myapp:agent`` process (SQLite, a token) per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serve_process import ServeProcess, serve_process

from plait.trace.access import new_token


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve_process(tmp_path_factory.mktemp("serve"), token=new_token()) as served:
        yield served
