"""``plait run`` with messy input and a silent provider (issue 11 §1, §3), through the console
script against a local wire server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_run import sse_text
from wire_server import WireServer

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def plait(*args: str | bytes, home: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PLAIT_MODEL", "PLAIT_MODEL_TIMEOUT")
    }
    clean.update({"PLAIT_HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1", **env})
    return subprocess.run(
        [sys.executable, "-c", "from plait.cli import main; main()", *args],
        capture_output=True,
        env=clean,
        timeout=60,
        check=False,
    )


def test_an_argument_that_is_not_utf8_is_kept_with_a_replacement(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_text("Summarised."))
    spec = f"openai-compatible:m@{server.url}/v1"
    result = plait("run", b"summarise caf\xe9.txt", "--model", spec, home=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    sent = server.bodies()[0]["messages"]
    assert sent[-1] == {"role": "user", "content": "summarise caf\ufffd.txt"}
    thread = result.stderr.decode().split("thread: ")[1].split()[0]
    shown = plait("threads", "show", thread, home=tmp_path)
    assert shown.returncode == 0 and "Summarised." in shown.stdout.decode()


def test_a_provider_that_never_answers_ends_at_plait_model_timeout(
    server: WireServer, tmp_path: Path
) -> None:
    server.stall()
    spec = f"openai-compatible:m@{server.url}/v1"
    result = plait("run", "hello?", "--model", spec, home=tmp_path, PLAIT_MODEL_TIMEOUT="0.5")
    assert result.returncode == 1
    assert "within its 0.5 s deadline" in " ".join(result.stderr.decode().split())


def test_json_lines_stay_printable_when_an_event_quotes_undecodable_text() -> None:
    from plait.cli.console import JsonEventWriter
    from plait.runtime.events import ErrorOccurred

    lines: list[str] = []
    JsonEventWriter(lines.append)(ErrorOccurred(error=OSError("no file \udcff"), where="tool:x"))
    lines[0].encode("utf-8")  # would raise UnicodeEncodeError on a lone surrogate
    assert '"error": "no file \ufffd"' in lines[0]
