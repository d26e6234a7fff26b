"""The workspace toolset: each tool, its bounds, the path guards through every tool, the gate,
and ``shell`` in a real bubblewrap sandbox."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from plait import Agent, ScriptedModel, ToolCall, ToolMessage
from plait.errors import ConfigurationError
from plait.messages import Blob, FilePart, ImagePart
from plait.workspace import Workspace
from plait.workspace.files import MAX_LINE_CHARS, MAX_READ_LINES, glob_pattern

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


async def call(
    workspace: Workspace, name: str, args: dict[str, Any], *, model: ScriptedModel | None = None
) -> ToolMessage:
    """Run one tool call through a real agent turn; the stored result."""
    script = model or ScriptedModel([ToolCall("c1", name, args), "done"])
    agent = Agent(script, tools=workspace.tools())
    result = await agent.run("go", thread_id=uuid.uuid4().hex)
    script.assert_complete()
    return next(m for m in result.new_messages if isinstance(m, ToolMessage))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "notes.md").write_text("# Notes\nalpha\nbeta\n")
    return root


async def test_ls_read_glob_and_grep_see_the_workspace(ws: Path) -> None:
    workspace = Workspace(str(ws))
    listing = await call(workspace, "ls", {})
    assert "src/" in listing.data and "notes.md" in listing.data
    read = await call(workspace, "read_file", {"path": "notes.md"})
    assert read.data.splitlines()[1:] == ["     1\t# Notes", "     2\talpha", "     3\tbeta"]
    absolute = await call(workspace, "read_file", {"path": str(ws / "src" / "app.py")})
    assert "def main" in absolute.data and not absolute.is_error
    found = await call(workspace, "glob", {"pattern": "**/*.py"})
    assert found.data.splitlines()[1:] == ["src/app.py"]
    hits = await call(workspace, "grep", {"pattern": "al+pha|return", "include": "*.md"})
    assert hits.data.splitlines()[1:] == ["notes.md:2:alpha"]
    bad = await call(workspace, "grep", {"pattern": "("})
    assert bad.is_error and "grep failed" in bad.data


async def test_read_file_pages_long_files_and_clips_long_lines(ws: Path) -> None:
    (ws / "long.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    (ws / "wide.txt").write_text("x" * (MAX_LINE_CHARS * 10) + "\nend\n")
    workspace = Workspace(str(ws))
    first = await call(workspace, "read_file", {"path": "long.txt"})
    head = first.data.splitlines()[0]
    assert f"lines 1-{MAX_READ_LINES}" in head and f"offset {MAX_READ_LINES}" in head
    page = await call(workspace, "read_file", {"path": "long.txt", "offset": 4998})
    assert page.data.splitlines()[1:] == ["  4999\tline 4998", "  5000\tline 4999"]
    wide = await call(workspace, "read_file", {"path": "wide.txt"})
    shown = wide.data.splitlines()
    assert shown[1].endswith("…") and len(shown[1]) < MAX_LINE_CHARS + 20
    assert shown[2] == "     2\tend"


def sparse_log(path: Path) -> None:
    with open(path, "wb") as handle:
        handle.write(b"".join(b"entry %06d\n" % i for i in range(1000)))
        handle.truncate(1 << 30)  # sparse: 1 GiB on paper


async def test_a_1_gb_file_is_read_a_page_at_a_time(ws: Path) -> None:
    sparse_log(ws / "big.log")
    workspace = Workspace(str(ws))
    page = await call(workspace, "read_file", {"path": "big.log", "limit": 3})
    assert page.data.splitlines()[1:] == ["     1\tentry 000000", "     2\tentry 000001",
                                          "     3\tentry 000002"]  # fmt: skip
    assert "offset 3" in page.data.splitlines()[0]


async def test_images_and_pdfs_are_read_as_parts(ws: Path) -> None:
    (ws / "shot.png").write_bytes(PNG)
    (ws / "doc.pdf").write_bytes(b"%PDF-1.7\n%%EOF\n")
    (ws / "fake.png").write_bytes(b"hello")
    workspace = Workspace(str(ws))
    image = await call(workspace, "read_file", {"path": "shot.png"})
    assert image.parts == [ImagePart(Blob(PNG))]
    document = await call(workspace, "read_file", {"path": "doc.pdf"})
    assert document.parts == [FilePart(Blob(b"%PDF-1.7\n%%EOF\n"), "application/pdf", "doc.pdf")]
    fake = await call(workspace, "read_file", {"path": "fake.png"})
    assert fake.parts == [] and "cannot be shown" in fake.data


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../outside.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "/proc/self/environ"}),
        ("read_file", {"path": "~/.bashrc"}),
        ("read_file", {"path": "link/secret.txt"}),
        ("ls", {"path": "link"}),
        ("ls", {"path": "/"}),
        ("glob", {"pattern": "*", "path": "/etc"}),
        ("glob", {"pattern": "../*"}),
        ("grep", {"pattern": "root", "path": "/etc"}),
        ("grep", {"pattern": "s", "path": "link"}),
        ("write_file", {"path": "../evil.txt", "content": "x"}),
        ("write_file", {"path": "link/evil.txt", "content": "x"}),
        ("write_file", {"path": "/tmp/evil.txt", "content": "x"}),
        ("edit_file", {"path": "link/secret.txt", "old_string": "s", "new_string": "t"}),
    ],
)
async def test_paths_outside_the_workspace_are_refused_by_every_tool(
    ws: Path, tool: str, args: dict[str, Any]
) -> None:
    outside = ws.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (ws / "link").symlink_to(outside)
    workspace = Workspace(str(ws), allow=["write"])
    result = await call(workspace, tool, args)
    assert result.is_error, result.data
    assert "secret" not in str(result.data).replace("secret.txt", "")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"


async def test_glob_does_not_follow_a_link_out_of_the_workspace(ws: Path) -> None:
    outside = ws.parent / "elsewhere"
    outside.mkdir()
    (outside / "x.py").write_text("")
    (ws / "out").symlink_to(outside)
    found = await call(Workspace(str(ws)), "glob", {"pattern": "**/*.py"})
    assert found.data.splitlines()[1:] == ["src/app.py"]


async def test_edit_file_needs_a_unique_match_or_replace_all(ws: Path) -> None:
    (ws / "dup.txt").write_text("a = 1\nb = 1\n")
    workspace = Workspace(str(ws), allow=["write"])
    twice = await call(
        workspace, "edit_file", {"path": "dup.txt", "old_string": "= 1", "new_string": "= 2"}
    )
    assert twice.is_error and "occurs 2 times" in twice.data
    assert (ws / "dup.txt").read_text() == "a = 1\nb = 1\n"
    missing = await call(
        workspace, "edit_file", {"path": "dup.txt", "old_string": "zzz", "new_string": "y"}
    )
    assert missing.is_error and "not found" in missing.data
    once = await call(
        workspace, "edit_file", {"path": "dup.txt", "old_string": "a = 1", "new_string": "a = 3"}
    )
    assert not once.is_error and (ws / "dup.txt").read_text() == "a = 3\nb = 1\n"
    every = await call(
        workspace,
        "edit_file",
        {"path": "dup.txt", "old_string": "= ", "new_string": ": ", "replace_all": True},
    )
    assert "2 replacements" in every.data and (ws / "dup.txt").read_text() == "a : 3\nb : 1\n"


async def test_writes_and_shell_are_refused_unless_allowed_or_approved(ws: Path) -> None:
    denied = await call(Workspace(str(ws)), "write_file", {"path": "n.txt", "content": "x"})
    assert denied.is_error and "--yes" in denied.data and not (ws / "n.txt").exists()
    shell = await call(Workspace(str(ws)), "shell", {"command": "touch made"})
    assert shell.is_error and "'shell'" in shell.data and not (ws / "made").exists()

    asked: list[tuple[str, dict[str, Any]]] = []

    async def no(tool: str, args: dict[str, Any]) -> bool:
        asked.append((tool, args))
        return False

    declined = await call(
        Workspace(str(ws), approve=no), "write_file", {"path": "n.txt", "content": "x"}
    )
    assert declined.is_error and "declined" in declined.data
    assert asked == [("write_file", {"path": "n.txt"})]
    approved = await call(
        Workspace(str(ws), approve=lambda tool, args: True),
        "write_file",
        {"path": "sub/n.txt", "content": "hello"},
    )
    assert not approved.is_error and (ws / "sub" / "n.txt").read_text() == "hello"


def test_bad_settings_are_configuration_errors(ws: Path) -> None:
    with pytest.raises(ConfigurationError, match="takes"):
        Workspace(str(ws), allow=["delete"])
    with pytest.raises(ConfigurationError, match="shell_timeout"):
        Workspace(str(ws), shell_timeout=float("nan"))
    with pytest.raises(NotADirectoryError):
        Workspace(str(ws / "notes.md"))


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("**/*.py", ["a.py", "x/y/a.py"], ["a.pyc", "a/py"]),
        ("src/*.md", ["src/a.md"], ["src/x/a.md", "a.md"]),
        ("[ab]?.txt", ["a1.txt", "bb.txt"], ["c1.txt", "a/1.txt"]),
        ("[!a]*", ["b", "ba"], ["a", "ab"]),
    ],
)
def test_glob_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    matcher = glob_pattern(pattern)
    assert all(matcher.match(p) for p in yes)
    assert not any(matcher.match(p) for p in no)


async def test_shell_runs_in_the_sandbox_with_the_workspace_writable(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_SECRET_FOR_TEST", "s3cret")
    workspace = Workspace(str(ws), allow=["shell"])
    made = await call(workspace, "shell", {"command": "echo hi > made.txt && cat made.txt && pwd"})
    assert not made.is_error, made.data
    assert made.data.splitlines() == ["[exit code 0]", "hi", str(ws)]
    assert (ws / "made.txt").read_text() == "hi\n"
    outside = await call(workspace, "shell", {"command": "touch /usr/evil || echo refused"})
    assert "refused" in outside.data and "evil" not in os.listdir("/usr")
    env = await call(workspace, "shell", {"command": "env | sort | cut -d= -f1"})
    assert env.data.splitlines()[1:] == ["HOME", "LANG", "PATH", "PWD", "SHLVL", "TERM", "_"]
    failed = await call(workspace, "shell", {"command": "exit 3"})
    assert failed.is_error and "exit code 3" in failed.data
    net = await call(
        workspace,
        "shell",
        {"command": "exec 3<>/dev/tcp/127.0.0.1/9 && echo open || echo no-network"},
    )
    assert "no-network" in net.data
    await workspace.aclose()


def processes_named(marker: str) -> list[str]:
    """The command lines in /proc that hold ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                line = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in line:
            found.append(f"{pid}: {line}")
    return found


async def test_a_shell_command_that_forks_and_outlives_its_deadline_is_killed(ws: Path) -> None:
    marker = f"plait-outlive-{uuid.uuid4().hex[:8]}"
    workspace = Workspace(str(ws), allow=["shell"])
    command = f"(exec -a {marker} sleep 300 &) ; exec -a {marker} sleep 300"
    result = await call(workspace, "shell", {"command": command, "timeout": 1})
    assert result.is_error and "killed after 1 s" in result.data
    left = await asyncio.to_thread(processes_named, marker)
    assert left == [], f"processes left: {left}"
    await workspace.aclose()


async def test_shell_output_is_capped(ws: Path) -> None:
    workspace = Workspace(str(ws), allow=["shell"], max_shell_output=1000)
    result = await call(workspace, "shell", {"command": "yes | head -c 100000"})
    assert "[output truncated]" in result.data and len(result.data) < 1200
    await workspace.aclose()


async def test_a_deadline_over_the_maximum_is_refused(ws: Path) -> None:
    workspace = Workspace(str(ws), allow=["shell"], max_shell_timeout=10)
    result = await call(workspace, "shell", {"command": "true", "timeout": 11})
    assert result.is_error and "<= 10 seconds" in result.data


FIXTURES = Path(__file__).parent / "fixtures"
PDF_WITH_TEXT = (
    b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
    b"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
    b"3 0 obj << /Type /Page /Parent 2 0 R /Contents 4 0 R >> endobj\n"
    b"4 0 obj << /Length 60 >> stream\nBT /F1 12 Tf (Quarterly revenue: 42) Tj "
    b"[(up ) (8%)] TJ ET\nendstream endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
)


async def test_a_pdf_skill_is_followed_end_to_end_with_its_script_run_in_the_sandbox(
    ws: Path,
) -> None:
    import shutil
    import sys

    from plait.skills import SkillsMiddleware

    skills = ws / ".skills"
    shutil.copytree(FIXTURES / "pdf-text", skills / "pdf-text")
    (ws / "report.pdf").write_bytes(PDF_WITH_TEXT)
    skill_md = str(skills / "pdf-text" / "SKILL.md")
    script = ".skills/pdf-text/scripts/extract_text.py"
    model = ScriptedModel(
        [
            ToolCall("c1", "read_file", {"path": skill_md}),
            ToolCall("c2", "shell", {"command": f"python3 {script} report.pdf report.txt"}),
            ToolCall("c3", "read_file", {"path": "report.txt"}),
            "The report says quarterly revenue was 42, up 8%.",
        ]
    )
    skills_mw = SkillsMiddleware(sources=[skills])
    python_bin = os.path.dirname(sys.executable)
    workspace = Workspace(
        str(ws),
        allow=["shell"],
        read_fallback=skills_mw.read_tool,
        shell_env={"PATH": f"{python_bin}:/usr/bin:/bin"},
    )
    agent = Agent(model, tools=workspace.tools(), middleware=[skills_mw])
    result = await agent.run("What does report.pdf say?", thread_id="pdf")
    model.assert_complete()
    assert "pdf-text" in model.requests[0].system_prompt  # the catalog lists the skill
    read, ran, text = (m for m in result.new_messages if isinstance(m, ToolMessage))
    assert "name: pdf-text" in read.data
    assert not ran.is_error and "wrote 3 text runs to report.txt" in ran.data, ran.data
    assert (ws / "report.txt").read_text() == "Quarterly revenue: 42\nup \n8%\n"
    assert "Quarterly revenue: 42" in text.data
    await workspace.aclose()


async def test_a_skill_path_outside_the_workspace_reads_through_the_skills_read_file(
    ws: Path, tmp_path: Path
) -> None:
    from plait.skills import SkillsMiddleware

    skills = tmp_path / "user-skills"
    import shutil

    shutil.copytree(FIXTURES / "pdf-text", skills / "pdf-text")
    skills_mw = SkillsMiddleware(sources=[skills])
    workspace = Workspace(str(ws), read_fallback=skills_mw.read_tool)
    inside = str(skills / "pdf-text" / "SKILL.md")
    model = ScriptedModel(
        [
            ToolCall("c1", "read_file", {"path": inside}),
            ToolCall("c2", "read_file", {"path": str(tmp_path / "elsewhere.txt")}),
            "ok",
        ]
    )
    agent = Agent(model, tools=workspace.tools(), middleware=[skills_mw])
    result = await agent.run("read", thread_id="t")
    skill, outside = (m for m in result.new_messages if isinstance(m, ToolMessage))
    assert not skill.is_error and "name: pdf-text" in skill.data
    assert outside.is_error and "not in a skill folder either" in outside.data
    model.assert_complete()


async def test_shell_runs_in_a_workspace_larger_than_a_skill_scripts_quota(ws: Path) -> None:
    from plait.sandbox.policy import SandboxLimits

    many = SandboxLimits().workspace_files or 0
    folder = ws / "many"
    folder.mkdir()
    for i in range(many + 10):
        (folder / f"f{i}").touch()
    workspace = Workspace(str(ws), allow=["shell"])
    result = await call(workspace, "shell", {"command": "ls many | wc -l"})
    assert not result.is_error, result.data
    assert result.data.splitlines()[1].strip() == str(many + 10)
    await workspace.aclose()


async def test_read_file_errors_are_tool_errors_like_the_other_tools(ws: Path) -> None:
    missing = await call(Workspace(str(ws)), "read_file", {"path": "missing.txt"})
    assert missing.is_error and missing.data.startswith("'missing.txt' does not exist")
    folder = await call(Workspace(str(ws)), "read_file", {"path": "src"})
    assert folder.is_error and folder.data == "'src' is a folder; ls lists it."
