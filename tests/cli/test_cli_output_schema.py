"""``plait run --output-schema schema.json``: the model is asked for the schema (natively, strict
schema the wire server accepts), an answer that breaks the file's schema goes back as a retry,
and standard output gets the answer's JSON; a bad schema file is exit 2 before any call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer
from cli_inprocess import empty_home
from typer.testing import CliRunner, Result
from wire_server import WireServer

from plait.cli.app import app

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"
SCHEMA = {
    "title": "Verdict",
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "why": {"type": "string", "minLength": 3},
        "score": {"type": "integer"},
    },
    "required": ["ok", "why"],
}


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return empty_home(tmp_path, monkeypatch) / "project"


def plait(server: WireServer, *args: str) -> Result:
    spec = f"openai-compatible:m@{server.url}/v1"
    return CliRunner().invoke(
        app, ["run", *args, "--model", spec, "--no-trace"], env={"COLUMNS": "200"}
    )


def test_the_answer_is_printed_as_json_after_a_retry(
    server: WireServer, project: Path, tmp_path: Path
) -> None:
    schema = tmp_path / "verdict.json"
    schema.write_text(json.dumps(SCHEMA))
    server._replies.append(sse_answer('{"ok": true, "why": "no", "score": null}'))  # too short
    server._replies.append(sse_answer('{"ok": true, "why": "fine", "score": null}'))
    result = plait(server, "judge this", "--output-schema", str(schema))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"ok": True, "why": "fine"}
    first, second = server.bodies()
    fmt = first["response_format"]["json_schema"]
    assert fmt["name"] == "Verdict" and fmt["strict"] is True
    assert fmt["schema"]["required"] == ["ok", "why", "score"]
    assert "why" in json.dumps(second["messages"][-1])  # the retry names the failing field


def test_a_schema_file_that_is_not_a_schema_is_exit_two(
    server: WireServer, project: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": 12}')
    result = plait(server, "judge", "--output-schema", str(bad))
    assert result.exit_code == 2
    assert "not a JSON Schema" in result.stderr
    missing = plait(server, "judge", "--output-schema", str(tmp_path / "none.json"))
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    assert server.bodies() == []
