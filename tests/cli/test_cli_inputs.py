"""What a ``plait run`` turn is given: the task from the argument and standard input (``echo ... |
plait run``, ``plait run -``, piped text after a task, at most 1 MiB) and ``--attach`` files as
parts (images, PDFs, text inlined); every bad input is exit 2 before any model call. In-process;
the pipe and terminal cases that need a real process are in ``test_cli_pipes.py``."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_completions import sse_answer
from cli_inprocess import empty_home
from images import png
from typer.testing import CliRunner, Result
from wire_server import WireServer

from plait.cli.app import app
from plait.cli.inputs import MAX_STDIN_BYTES, attachment_part
from plait.errors import ConfigurationError
from plait.messages import FilePart, ImagePart, TextPart

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return empty_home(tmp_path, monkeypatch) / "project"


def plait(server: WireServer, *args: str, stdin: str | bytes | None = None) -> Result:
    spec = f"openai-compatible:m@{server.url}/v1"
    return CliRunner().invoke(
        app, ["run", *args, "--model", spec, "--no-trace"], input=stdin, env={"COLUMNS": "200"}
    )


def user_content(server: WireServer) -> Any:
    return server.bodies()[0]["messages"][-1]["content"]


@pytest.mark.parametrize("args", [(), ("-",)])
def test_piped_stdin_is_the_task(server: WireServer, project: Path, args: tuple[str, ...]) -> None:
    server._replies.append(sse_answer("Piped."))
    result = plait(server, *args, stdin="summarise this please\n")
    assert result.exit_code == 0, result.output
    assert user_content(server) == "summarise this please\n"


def test_piped_stdin_is_appended_to_a_task_argument(server: WireServer, project: Path) -> None:
    server._replies.append(sse_answer("Done."))
    result = plait(server, "explain this error", stdin="Traceback: KeyError 'x'\n")
    assert result.exit_code == 0, result.output
    assert user_content(server) == "explain this error\n\nTraceback: KeyError 'x'\n"


def test_no_task_and_empty_stdin_is_a_usage_error(server: WireServer, project: Path) -> None:
    result = plait(server, stdin="")
    assert result.exit_code == 2
    assert "echo TASK | plait run" in result.stderr
    assert server.bodies() == []


def test_stdin_over_the_bound_is_exit_two_before_any_call(
    server: WireServer, project: Path
) -> None:
    result = plait(server, "-", stdin="x" * (MAX_STDIN_BYTES + 1))
    assert result.exit_code == 2
    assert "over 1,048,576 bytes" in result.stderr
    assert server.bodies() == []


def test_stdin_that_is_not_utf8_is_exit_two(server: WireServer, project: Path) -> None:
    result = plait(server, "-", stdin=b"\xff\xfe binary")
    assert result.exit_code == 2 and "not UTF-8" in result.stderr
    assert server.bodies() == []


def test_an_attached_image_and_text_file_reach_the_model_as_parts(
    server: WireServer, project: Path
) -> None:
    image = png(4, 3)
    (project / "shot.png").write_bytes(image)
    (project / "log.txt").write_text("line one\nline two\n", encoding="utf-8")
    server._replies.append(sse_answer("A small image and a log."))
    result = plait(server, "what are these?", "--attach", "shot.png", "-a", "log.txt")
    assert result.exit_code == 0, result.output
    parts = user_content(server)
    assert parts[0] == {"type": "text", "text": "what are these?"}
    assert parts[1]["type"] == "image_url"
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == image
    assert parts[2]["type"] == "text"
    assert parts[2]["text"] == "--- log.txt (log.txt) ---\nline one\nline two\n"


def test_an_attached_pdf_is_a_file_part(server: WireServer, project: Path) -> None:
    pdf = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
    (project / "report.pdf").write_bytes(pdf)
    server._replies.append(sse_answer("A report."))
    result = plait(server, "summarise", "--attach", "report.pdf")
    assert result.exit_code == 0, result.output
    [_, part] = user_content(server)
    assert part["type"] == "file" and part["file"]["filename"] == "report.pdf"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.png", None, "--attach: no such file: missing.png"),
        ("data.bin", b"\x00\x01\x02\x03", "not an image (PNG, JPEG, GIF, WebP), a PDF or UTF-8"),
        ("fake.png", b"this is not a png", "cannot attach fake.png"),
        ("big.txt", b"x" * (1024 * 1024 + 1), "over the 1,048,576 a text file may have"),
        ("folder", "dir", "is not a file"),
    ],
)
def test_a_bad_attachment_is_exit_two_with_one_line_before_any_call(
    server: WireServer, project: Path, name: str, content: bytes | str | None, message: str
) -> None:
    if content == "dir":
        (project / name).mkdir()
    elif isinstance(content, bytes):
        (project / name).write_bytes(content)
    result = plait(server, "look", "--attach", name)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert server.bodies() == []


def test_attachment_kinds_by_content_and_suffix(tmp_path: Path) -> None:
    (tmp_path / "noext").write_bytes(png(1, 1))  # sniffed, no suffix needed
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.7\n%%EOF\n")
    (tmp_path / "a.md").write_text("# Title\n", encoding="utf-8")
    assert isinstance(attachment_part(tmp_path / "noext"), ImagePart)
    pdf = attachment_part(tmp_path / "a.pdf")
    assert isinstance(pdf, FilePart) and pdf.media_type == "application/pdf"
    text = attachment_part(tmp_path / "a.md")
    assert isinstance(text, TextPart) and text.text.endswith("# Title\n")
    (tmp_path / "b.pdf").write_bytes(b"not a pdf at all")
    with pytest.raises(ConfigurationError, match="not a PDF"):
        attachment_part(tmp_path / "b.pdf")
